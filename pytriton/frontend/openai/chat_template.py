"""How a chat's messages become the model's prompt: a Hugging Face tokenizer's chat template (`--openai-tokenizer
PATH`, a local folder or a hub name; needs the optional `transformers`), else a plain template of our own:

    <role>: <content>
    ...
    assistant:

(one line per message, the last line asking for the assistant's turn)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("pytriton.frontend")

ChatTemplate = Callable[[list[dict[str, str]]], str]


def plain_template(messages: list[dict[str, str]]) -> str:
    """The default template: `role: content` lines, then `assistant:` (without a trailing space)."""
    return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"


def tokenizer_template(path: str) -> ChatTemplate:
    """The chat template of the Hugging Face tokenizer at `path` (RuntimeError naming the path when transformers is
    missing or the tokenizer cannot be loaded: the server does not start)."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise RuntimeError(f"--openai-tokenizer {path}: the chat template needs transformers "
                           "(pip install 'pytriton[llm]')") from None
    try:
        tokenizer: Any = AutoTokenizer.from_pretrained(path)
    except Exception as exc:  # noqa: BLE001 - any failure of the load stops the start with its reason
        raise RuntimeError(f"--openai-tokenizer {path}: cannot load the tokenizer: {exc}") from None

    def apply(messages: list[dict[str, str]]) -> str:
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return str(prompt)

    logger.info("OpenAI chat template: the tokenizer at %s", path)
    return apply


def chat_template(tokenizer: str | None) -> ChatTemplate:
    return tokenizer_template(tokenizer) if tokenizer else plain_template


__all__ = ["ChatTemplate", "chat_template", "plain_template", "tokenizer_template"]
