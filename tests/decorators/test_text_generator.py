"""`@text_generator`: the model a generator of text pieces becomes, called as the worker calls it (a list of one
request, each yield one response per request): `max_tokens`, `stop` (also across pieces), `stream` false, echo,
token counts, and the function closed when the stream is."""

from __future__ import annotations

import asyncio
import json

import numpy as np

from pytriton.decorators import text_generator
from pytriton.model_config import declaration_of


def _request(prompt: str, stream: bool = True, echo: bool = False, **sampling) -> dict[str, np.ndarray]:
    return {"text_input": np.array([prompt.encode()], dtype=np.object_),
            "sampling_parameters": np.array([json.dumps(sampling).encode()], dtype=np.object_),
            "stream": np.array([stream]), "exclude_input_in_output": np.array([not echo])}


closed: list[int] = []


@text_generator(prompt_tokens=len)
def letters(prompt, parameters):
    sent = 0
    try:
        for piece in parameters.get("pieces", ["ab", "c", "de", "f"]):
            yield piece
            sent += 1
    finally:
        closed.append(sent)


def _texts(responses) -> list[str]:
    return [r[0]["text_output"][0].decode() for r in responses]


def test_the_declaration_is_a_decoupled_vllm_style_model():
    declaration = declaration_of(letters)
    assert declaration.decoupled and declaration.max_batch_size == 0
    assert {t.name for t in declaration.inputs} >= {"text_input", "sampling_parameters", "stream"}
    assert {t.name for t in declaration.outputs} == {"text_output", "num_input_tokens", "num_output_tokens"}
    assert letters.__name__ == "letters"


def test_each_piece_is_a_response_with_its_token_counts():
    responses = list(letters([_request("xyz")]))
    assert _texts(responses) == ["ab", "c", "de", "f"]
    assert [int(r[0]["num_output_tokens"][0]) for r in responses] == [1, 1, 1, 1]
    assert {int(r[0]["num_input_tokens"][0]) for r in responses} == {3}


def test_max_tokens_ends_after_that_many_pieces_and_closes_the_function():
    closed.clear()
    assert _texts(letters([_request("x", max_tokens=2)])) == ["ab", "c"]
    assert closed == [1]  # (closed at its second yield, before it counted that piece: no third was made)


def test_stop_ends_the_text_before_the_stop_string_even_across_pieces():
    assert "".join(_texts(letters([_request("x", stop=["cd"])]))) == "ab"
    assert "".join(_texts(letters([_request("x", stop="f")]))) == "abcde"
    assert "".join(_texts(letters([_request("x", stop=["zz"])]))) == "abcdef"
    # (a piece that may begin a stop string is held back until the next says whether it does)
    assert _texts(letters([_request("x", stop=["cx"], pieces=["ab", "c", "d"])])) == ["ab", "cd"]


def test_stream_false_answers_once_and_echo_prefixes_the_prompt():
    responses = list(letters([_request("Q:", stream=False, echo=True)]))
    assert _texts(responses) == ["Q:abcdef"]
    assert int(responses[0][0]["num_output_tokens"][0]) == 4


def test_an_async_generator_is_wrapped_the_same():
    @text_generator
    async def words(prompt, parameters):
        for word in prompt.split():
            yield word

    async def run():
        return [r async for r in words([_request("a b c", max_tokens=2)])]

    assert _texts(asyncio.run(run())) == ["a", "b"]
    assert "num_input_tokens" not in {t.name for t in declaration_of(words).outputs}
