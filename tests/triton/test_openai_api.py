"""`Triton(config=TritonConfig(openai_port=0, openai_api_key=...))`: a `@text_generator` bound in Python (hosted by
this process) is served on the OpenAI port, whose number `Triton.ports` gives."""

from __future__ import annotations

import openai
import pytest

from pytriton.decorators import text_generator
from pytriton.triton import Triton, TritonConfig


@text_generator(prompt_tokens=lambda prompt: len(prompt.split()))
def shout(prompt, parameters):
    for word in prompt.split():
        yield word.upper() + " "


def test_a_bound_text_generator_is_served_on_the_openai_port():
    config = TritonConfig(http_address="127.0.0.1", http_port=0, grpc_address="127.0.0.1", grpc_port=0,
                          metrics_address="127.0.0.1", metrics_port=0, openai_port=0, openai_api_key="k1")
    with Triton(config=config) as triton:
        triton.bind("shout", shout, **shout.bind_args)
        triton.run()
        port = triton.ports["openai"]
        assert isinstance(port, int) and port > 0
        with openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k1", max_retries=0, timeout=60) as client:
            chunks = list(client.chat.completions.create(
                model="shout", messages=[{"role": "user", "content": "hello there"}], stream=True))
            assert "".join(c.choices[0].delta.content or "" for c in chunks) == "USER: HELLO THERE ASSISTANT: "
            answer = client.completions.create(model="shout", prompt="a b c", max_tokens=2)
            assert answer.choices[0].text == "A B "
            assert answer.usage is not None and answer.usage.prompt_tokens == 3
        with openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k2", max_retries=0) as wrong, \
                pytest.raises(openai.AuthenticationError):
            wrong.models.list()


def test_no_openai_port_unless_asked():
    config = TritonConfig(http_address="127.0.0.1", http_port=0, grpc_address="127.0.0.1", grpc_port=0,
                          metrics_address="127.0.0.1", metrics_port=0)
    with Triton(config=config) as triton:
        triton.run()
        assert "openai" not in triton.ports
