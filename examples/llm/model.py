"""A tiny text generator that needs no weights: a character-level Markov chain learnt, at import, from the few
sentences below. It writes plausible-looking nonsense one character at a time, which is all an example of serving
an LLM needs: a prompt in, pieces of text out, as they are made.

`@text_generator` is the one line that makes it an LLM model: the OpenAI port's completions and chat completions,
Triton's generate extension and gRPC streams all serve it."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from pytriton.decorators import text_generator

CORPUS = (
    "the server reads the request and hands the prompt to the model. the model answers with one piece of text at a "
    "time, and the server sends each piece to the client as soon as it is made. a client that stops reading holds "
    "the model back; a client that leaves stops it. the queue keeps the requests in order, the batcher groups them, "
    "and the workers run the model in processes of their own. tensors travel through shared memory, never copied on "
    "the way. the metrics count every request, the traces time it, and the limits keep the memory of the server "
    "bounded whatever the clients send. "
)
ORDER = 3  # characters of context
DEFAULT_PIECES = 64  # when the request gives no max_tokens


def _table(text: str) -> dict[str, list[str]]:
    """The characters seen after each context of 0 to ORDER characters."""
    table: dict[str, list[str]] = {}
    for order in range(ORDER + 1):
        for i in range(len(text) - order):
            table.setdefault(text[i:i + order], []).append(text[i + order])
    return table


TABLE = _table(CORPUS)


def _choices(context: str) -> list[str]:
    """What may follow `context`: after its longest ending seen in the corpus (at worst any character)."""
    for start in range(len(context) + 1):
        choices = TABLE.get(context[start:])
        if choices:
            return choices
    return TABLE[""]


@text_generator(prompt_tokens=len)  # one token = one character, for `usage`
def tiny(prompt: str, parameters: dict[str, Any]) -> Iterator[str]:
    """Continue `prompt` one character at a time; `seed` (default 0) picks the path, `temperature` 0 always takes
    the most frequent next character."""
    rng = random.Random(parameters.get("seed", 0))
    greedy = parameters.get("temperature") == 0
    context = prompt.lower()[-ORDER:]
    for _ in range(int(parameters.get("max_tokens") or DEFAULT_PIECES)):
        choices = _choices(context)
        char = max(set(choices), key=lambda c: (choices.count(c), c)) if greedy else rng.choice(choices)
        yield char
        context = (context + char)[-ORDER:]
