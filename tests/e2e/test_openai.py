"""The OpenAI-compatible port through the official `openai` client: the models list, completions and chat
completions (whole and streamed, `usage`, `stop`, `max_tokens`, sampling fields handed to the model) for a
`@text_generator` callable and for repository models in vLLM's and TensorRT-LLM's conventions, embeddings, the API
key, and every refusal in OpenAI's error shape and status. Models: tests/openai_models.py, tests/repositories/openai."""

from __future__ import annotations

import base64
import json

import numpy as np
import openai
import pytest
import requests

from tests._support.paths import REPOSITORIES
from tests._support.serving import serve

REPOSITORY = REPOSITORIES / "openai"
KEY = "sk-test-key"


@pytest.fixture(scope="module")
def server():
    with serve("tests.openai_models:pieces", "--model-repository", str(REPOSITORY), "--openai-port", "0",
               "--http-max-input-size", "65536", env={"PYTRITON_OPENAI_API_KEY": KEY}) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.openai_url, api_key=KEY, max_retries=0, timeout=60) as c:
        yield c


def _post(server, route: str, body: bytes | dict, key: str | None = KEY, method: str = "POST") -> requests.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return requests.request(method, f"{server.openai_url}/{route}", data=data, headers=headers, timeout=60)


def test_models_lists_every_ready_model(client):
    models = client.models.list()
    assert sorted(m.id for m in models.data) == ["embed", "not_llm", "pieces", "trtllm_like", "vllm_like"]
    assert all(m.object == "model" and m.owned_by == "pytriton" for m in models.data)
    assert client.models.retrieve("pieces").id == "pieces"
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("nope")
    assert info.value.code == "model_not_found"


def test_completion_of_a_text_generator_with_usage_and_max_tokens(client):
    answer = client.completions.create(model="pieces", prompt="one two three", max_tokens=3,
                                       extra_body={"pieces": 10})
    assert answer.object == "text_completion" and answer.model == "pieces"
    assert answer.choices[0].text == "p0 p1 p2 "
    assert answer.choices[0].finish_reason == "length"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.total_tokens) == (3, 3, 6)


def test_completion_ends_before_the_stop_string(client):
    answer = client.completions.create(model="pieces", prompt="x", stop=["p3"], extra_body={"pieces": 10})
    assert answer.choices[0].text == "p0 p1 p2 "
    assert answer.choices[0].finish_reason == "stop"


def test_streamed_chat_completion_sends_each_piece_in_order_then_done(client):
    stream = client.chat.completions.create(model="pieces", messages=[{"role": "user", "content": "hi there"}],
                                            stream=True, stream_options={"include_usage": True},
                                            extra_body={"pieces": 6})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].delta.content for c in chunks[1:7]] == [f"p{i} " for i in range(6)]
    assert chunks[7].choices[0].finish_reason == "stop"
    assert chunks[8].choices == [] and chunks[8].usage.completion_tokens == 6
    assert chunks[8].usage.prompt_tokens == len("user: hi there\nassistant:".split())
    assert len(chunks) == 9 and len({c.id for c in chunks}) == 1


def test_the_raw_stream_ends_with_done(server):
    answer = _post(server, "completions", {"model": "pieces", "prompt": "x", "stream": True, "pieces": 2})
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "text/event-stream; charset=utf-8"
    events = answer.text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    assert [json.loads(e[len("data: "):])["choices"][0]["text"] for e in events[:-2]] == ["p0 ", "p1 ", ""]


def test_whole_chat_completion(client):
    answer = client.chat.completions.create(model="pieces", messages=[{"role": "user", "content": "hi"}],
                                            extra_body={"pieces": 3})
    assert answer.object == "chat.completion"
    assert answer.choices[0].message.role == "assistant"
    assert answer.choices[0].message.content == "p0 p1 p2 "


def test_an_async_generator_is_served_the_same():
    # (a second callable: served by its own `pytriton serve`)
    with serve("tests.openai_models:async_pieces", "--openai-port", "0") as other:
        with openai.OpenAI(base_url=other.openai_url, api_key="unused", max_retries=0, timeout=60) as client:
            chunks = list(client.completions.create(model="async_pieces", prompt="a b c", stream=True))
    assert "".join(c.choices[0].text for c in chunks) == "a b c "


def test_vllm_convention_gets_the_sampling_fields_as_json(client):
    answer = client.completions.create(model="vllm_like", prompt="alpha beta", max_tokens=7, temperature=0.5,
                                       top_p=0.9, seed=3, stop="zz", extra_body={"top_k": 4})
    sampling, _, words = answer.choices[0].text.partition("|")
    assert json.loads(sampling) == {"sampling": {"max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "seed": 3,
                                                 "stop": ["zz"], "top_k": 4},
                                    "stream": False, "exclude_input_in_output": True}
    assert words == "alpha beta "
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (2, 1)


def test_vllm_convention_streamed_with_echo(client):
    chunks = list(client.completions.create(model="vllm_like", prompt="a b", stream=True, echo=True))
    texts = [c.choices[0].text for c in chunks]
    assert json.loads(texts[0][:-1])["exclude_input_in_output"] is False and json.loads(texts[0][:-1])["stream"]
    assert texts[1:3] == ["a ", "b "]


def test_tensorrt_llm_convention_gets_its_inputs(client):
    answer = client.completions.create(model="trtllm_like", prompt="hello", max_tokens=5, stop=["a", "b"],
                                       temperature=0.25, seed=9)
    assert json.loads(answer.choices[0].text) == {"text_input": "hello", "max_tokens": 5, "stop_words": ["a", "b"],
                                                  "temperature": 0.25, "seed": 9, "stream": False}
    default = client.completions.create(model="trtllm_like", prompt="hello")
    assert json.loads(default.choices[0].text)["max_tokens"] == 16  # (as Triton's frontend asks when none is given)
    assert default.usage is None  # the model reports no token counts


def test_a_model_that_does_not_stream_answers_one_chunk(client):
    chunks = list(client.chat.completions.create(model="trtllm_like", messages=[{"role": "user", "content": "q"}],
                                                 stream=True))
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert json.loads(content)["text_input"] == "user: q\nassistant:"


def test_embeddings_as_floats_and_base64(client, server):
    answer = client.embeddings.create(model="embed", input=["banana", "kiwi"])  # (the client asks for base64)
    assert [d.embedding for d in answer.data] == [[6.0, 3.0, 1.0], [4.0, 0.0, 1.0]]
    assert [d.index for d in answer.data] == [0, 1]
    floats = _post(server, "embeddings", {"model": "embed", "input": "aa", "encoding_format": "float"}).json()
    assert floats["data"][0]["embedding"] == [2.0, 2.0, 1.0]
    packed = _post(server, "embeddings", {"model": "embed", "input": "aa", "encoding_format": "base64"}).json()
    assert np.frombuffer(base64.b64decode(packed["data"][0]["embedding"]), np.float32).tolist() == [2.0, 2.0, 1.0]


def test_the_api_key_is_required(server):
    with openai.OpenAI(base_url=server.openai_url, api_key="wrong", max_retries=0) as anonymous, \
            pytest.raises(openai.AuthenticationError) as info:
        anonymous.models.list()
    assert info.value.code == "invalid_api_key"
    answer = _post(server, "models", b"", key=None, method="GET")
    assert answer.status_code == 401 and answer.json()["error"]["type"] == "invalid_request_error"


def _error(answer: requests.Response, status: int) -> dict:
    assert answer.status_code == status, answer.text
    assert answer.headers["Content-Type"] == "application/json"
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert "Traceback" not in error["message"]
    return error


def test_bad_json_is_a_bad_request(server):
    error = _error(_post(server, "chat/completions", b'{"model": "pieces", "messages": ['), 400)
    assert error["type"] == "invalid_request_error" and "JSON" in error["message"]
    _error(_post(server, "chat/completions", b"[1, 2]"), 400)
    _error(_post(server, "completions", b""), 400)


def test_unknown_model_is_not_found(client):
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    assert info.value.code == "model_not_found" and "nope" in info.value.message
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="nope", prompt="x", stream=True)


def test_more_than_one_choice_is_refused(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="pieces", messages=[{"role": "user", "content": "x"}], n=2)
    assert info.value.param == "n" and "n=2" in info.value.message


def test_malformed_fields_are_bad_requests(server, client):
    for body in ({"model": "pieces"}, {"model": "pieces", "messages": []}, {"model": "pieces", "messages": [{}]},
                 {"model": "pieces", "messages": [{"role": "user", "content": 3}]},
                 {"model": "pieces", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1},
                 {"model": "pieces", "messages": [{"role": "user", "content": "x"}], "stream": "yes"},
                 {"messages": [{"role": "user", "content": "x"}]}):
        _error(_post(server, "chat/completions", body), 400)
    _error(_post(server, "completions", {"model": "pieces", "prompt": [1, 2]}), 400)
    _error(_post(server, "embeddings", {"model": "embed", "input": []}), 400)
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="not_llm", prompt="x")
    assert "does not generate text" in info.value.message
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="pieces", input="x")


def test_a_body_past_the_limit_is_413_in_openai_shape(client):
    with pytest.raises(openai.APIStatusError) as info:
        client.completions.create(model="pieces", prompt="x" * 70_000)
    assert info.value.status_code == 413
    assert info.value.body["type"] == "invalid_request_error"  # (OpenAI's shape: the client reads `error` as a dict)
    assert "exceeds the maximum allowed input size of 65536 bytes" in info.value.body["message"]


def test_unknown_route_and_wrong_method(server):
    assert _error(_post(server, "files", {}), 404)["code"] == "unknown_url"
    assert _error(_post(server, "completions", b"", method="GET"), 405)["code"] == "method_not_allowed"


def test_a_model_error_before_the_first_piece_is_an_error_answer(client):
    with pytest.raises(openai.InternalServerError) as info:
        client.completions.create(model="pieces", prompt="x", stream=True, extra_body={"fail_at": 0})
    assert "pieces failed at piece 0" in info.value.message


def test_a_model_error_mid_stream_ends_the_stream_with_an_error_event(client):
    stream = client.completions.create(model="pieces", prompt="x", stream=True, extra_body={"fail_at": 2})
    texts = []
    with pytest.raises(openai.APIError) as info:
        for chunk in stream:
            texts.append(chunk.choices[0].text)
    assert texts == ["p0 ", "p1 "]
    assert "pieces failed at piece 2" in info.value.message


def test_openai_requests_count_in_the_model_statistics_and_metrics(server, client):
    def successes() -> tuple[int, float]:
        stats = requests.get(f"http://{server.http_url}/v2/models/trtllm_like/stats", timeout=10).json()
        metrics = requests.get(server.metrics_url, timeout=10).text
        line = next(line for line in metrics.splitlines()
                    if line.startswith("nv_inference_request_success{") and 'model="trtllm_like"' in line)
        return stats["model_stats"][0]["inference_stats"]["success"]["count"], float(line.rsplit(" ", 1)[1])

    before = successes()
    client.completions.create(model="trtllm_like", prompt="x")
    assert successes() == (before[0] + 1, before[1] + 1)


def test_openai_requests_are_traced_as_the_http_port_traces(tmp_path):
    path = tmp_path / "trace.json"
    with serve("tests.openai_models:pieces", "--openai-port", "0", "--trace-config", f"triton,file={path}",
               "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1") as server, \
            openai.OpenAI(base_url=server.openai_url, api_key="x", max_retries=0, timeout=60) as client:
        client.completions.create(model="pieces", prompt="x")
        assert len(list(client.completions.create(model="pieces", prompt="x", stream=True))) == 6
    entries = json.loads(path.read_text())  # written at the graceful stop
    traces: dict[int, list[str]] = {}
    for entry in entries:
        names = traces.setdefault(entry["id"], [])
        if "timestamps" in entry:
            names += [t["name"] for t in entry["timestamps"]]
        else:
            assert entry["model_name"] == "pieces"
    assert len(traces) == 2
    for names in traces.values():
        assert names[0] == "HTTP_RECV_START" and names[-1] == "HTTP_SEND_END", names
        assert "REQUEST_START" in names and "REQUEST_END" in names
