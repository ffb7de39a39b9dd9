"""`pytriton serve`'s OpenAI-compatible port options (docs/guide/llm.md)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

API_KEY_ENV = "PYTRITON_OPENAI_API_KEY"
_NAMES = ("openai_port", "openai_address", "openai_api_key", "openai_tokenizer")


def openai_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the OpenAI port's flags to `command`, which receives them as `openai` (ServerConfig fields)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["openai"] = {name: kwargs.pop(name) for name in _NAMES}
        return command(*args, **kwargs)

    options = [
        click.option("--openai-port", type=click.IntRange(0, 65535), default=None, metavar="PORT",
                     help="Serve the OpenAI-compatible routes (/v1/models, /v1/completions, /v1/chat/completions, "
                          "/v1/embeddings) on this port (0 = any free port). Default: off."),
        click.option("--openai-address", default="0.0.0.0", show_default=True,
                     help="The OpenAI port's address."),
        click.option("--openai-api-key", envvar=API_KEY_ENV, default=None, metavar="KEY",
                     help=f"Clients of the OpenAI port must send 'Authorization: Bearer KEY' (else 401). Default: "
                          f"${API_KEY_ENV}, else no key needed. Prefer the variable: a command line is visible to "
                          "other users of the host."),
        click.option("--openai-tokenizer", default=None, metavar="PATH",
                     help="A Hugging Face tokenizer (folder or hub name) whose chat template turns chat messages "
                          "into the prompt (needs transformers: pip install 'pytriton[llm]'). Default: a plain "
                          "'role: content' template."),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


__all__ = ["API_KEY_ENV", "openai_options"]
