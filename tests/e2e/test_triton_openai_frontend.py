"""Triton's OpenAI-compatible frontend (the server repository's `python/openai`), started unchanged as its
`openai_frontend/main.py` starts, over pytriton's in-process API (`import tritonserver`, `import tritonfrontend`),
serving tests/repositories/openai_llm (`mock_vllm` in the tensor convention of Triton's vLLM backend, asked with
`--backend vllm`; `mock_trtllm` in TensorRT-LLM's, asked by a frontend without it), with a word tokenizer made here
(nothing is downloaded): the official `openai` client lists the models and asks for completions and chat
completions, streamed and not; Triton's KServe front-ends (`--enable-kserve-frontends`) serve beside it.

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server holding
`python/openai` (tag v2.52.0 or later), and the frontend's packages (its requirements.txt: fastapi..., with
uvicorn, transformers and tokenizers) and `openai` are installed:

    git -C server archive v2.52.0 python/openai | tar -x -C /tmp/triton-server-src
    pip install "fastapi==0.111.1" "transformers<5" openai  # v2.60 and later: also partial-json-parser
    PYTRITON_TRITON_SERVER_SRC=/tmp/triton-server-src scripts/test-slow tests/e2e/test_triton_openai_frontend.py
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests._support.logs import PID_RE, PORT_RE
from tests._support.paths import REPOSITORIES
from tests._support.processes import started_pids
from tests._support.shm import shm_segments_of
from tests._support.waits import holds_within

CHECKOUT = os.environ.get("PYTRITON_TRITON_SERVER_SRC", "")
FRONTEND = Path("python", "openai", "openai_frontend", "main.py")
MAIN = Path(CHECKOUT, FRONTEND)
MODEL = "mock_vllm"
# A model's error: 400 up to v2.62, then 500 (an error that is not the client's: routers/completions.py)
ROUTER = MAIN.parent / "frontend" / "fastapi" / "routers" / "completions.py"
MODEL_ERROR_STATUS = 500 if ROUTER.is_file() and "ServerError" in ROUTER.read_text() else 400
# Frontends from v2.60 ask the model for the token counts of a request (the vLLM backend's `return_num_input_tokens`
# ...); from v2.63 they report them as the `usage` of their answers whatever the model's backend (v2.60 to v2.62: only
# for models of backend "vllm", where the mock's is "python")
CONVERSION = MAIN.parent / "engine" / "utils" / "triton.py"
COUNTS_TOKENS = CONVERSION.is_file() and "return_num_input_tokens" in CONVERSION.read_text() and \
    'backend != "vllm"' not in CONVERSION.read_text()


def missing_modules() -> list[str]:
    """Those the frontend needs that do not import here: what its requirements.txt names (fastapi, from v2.60
    partial-json-parser...), what Triton's container brings (uvicorn, transformers and tokenizers) and the client."""
    names = ["uvicorn", "transformers", "tokenizers", "openai"]
    requirements = MAIN.parent.parent / "requirements.txt"
    if requirements.is_file():
        for line in requirements.read_text().splitlines():
            name = re.split(r"[\s=<>!~;\[#]", line.strip(), maxsplit=1)[0]
            if name:
                names.append(name.replace("-", "_").lower())
    return [name for name in dict.fromkeys(names) if importlib.util.find_spec(name) is None]


MISSING = missing_modules() if MAIN.is_file() else []
OPENAI_RE = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
# The chat template of the tokenizer made here: what the frontend turns the messages into before the model sees them.
TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHECKOUT, reason="PYTRITON_TRITON_SERVER_SRC names no checkout of Triton's server "
                                            "repository (its python/openai, tag v2.52.0 or later)"),
    pytest.mark.skipif(bool(CHECKOUT) and not MAIN.is_file(),
                       reason=f"the checkout in PYTRITON_TRITON_SERVER_SRC ({CHECKOUT}) has no {FRONTEND} (Triton's "
                              "OpenAI frontend is in v2.52.0 and later)"),
    pytest.mark.skipif(bool(MISSING), reason=f"Triton's OpenAI frontend needs {', '.join(MISSING)} (see its "
                                             "python/openai/requirements.txt): not installed"),
]


def make_tokenizer(folder: Path) -> None:
    """A word-level tokenizer with a chat template, as `transformers.AutoTokenizer.from_pretrained(folder)` reads
    it: only the template matters to the frontend (it renders the chat messages into the prompt)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    folder.mkdir()
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "chat_template": TEMPLATE}))


class Frontend:
    """`main.py` of Triton's OpenAI frontend in a process of its own, on ports 0 of 127.0.0.1; its log read."""

    def __init__(self, repository: Path, tokenizer: Path, backend: list[str], timeout_s: float = 120.0) -> None:
        """`backend`: ["--backend", "vllm"], or [] (the request format then follows each model's backend)."""
        args = [sys.executable, str(MAIN), "--model-repository", str(repository), "--tokenizer", str(tokenizer),
                *backend, "--host", "127.0.0.1", "--openai-port", "0", "--enable-kserve-frontends",
                "--kserve-http-port", "0", "--kserve-grpc-port", "0"]
        env = dict(os.environ, PYTRITON_EXIT_WITH_PARENT="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        self.process = subprocess.Popen(args, cwd=MAIN.parent, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        started_pids.add(self.process.pid)
        self.lines: list[str] = []
        self.ports: dict[str, int] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        holds_within(lambda: "openai" in self.ports or self.process.poll() is not None, timeout_s)
        if "openai" not in self.ports:
            self.stop()
        assert "openai" in self.ports, f"Triton's OpenAI frontend did not start; its log:\n{self.log}"

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            for pattern, name in ((PORT_RE, None), (OPENAI_RE, "openai")):
                match = pattern.search(line)
                if match:
                    self.ports[name or match.group(1)] = int(match.group(match.lastindex or 1))
            for pid in PID_RE.findall(line):
                started_pids.add(int(pid))

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(5)
        return self.process.returncode


@contextlib.contextmanager
def running(repository: str, tokenizer: Path, backend: list[str]) -> Iterator[Frontend]:
    """The frontend for the block; it must stop on SIGTERM with its server, leaving no shared memory."""
    started = Frontend(REPOSITORIES / repository, tokenizer, backend)
    try:
        yield started
    finally:
        code = started.stop()
        log = started.log
        assert code == 0, f"the frontend exited with {code}; its log:\n{log}"
        # main.py's SIGTERM handler stops the OpenAI, KServe HTTP and gRPC front-ends, then the server
        assert "Shutting down Triton Inference Server..." in log and "pytriton server stopped" in log, log
        assert shm_segments_of({started.process.pid}) == []


@contextlib.contextmanager
def openai_client(frontend: Frontend) -> Iterator[Any]:
    import openai

    with openai.OpenAI(base_url=f"http://127.0.0.1:{frontend.ports['openai']}/v1", api_key="EMPTY",
                       max_retries=0) as made:
        yield made


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("openai") / "tokenizer"
    make_tokenizer(folder)
    return folder


@pytest.fixture(scope="module")
def frontend(tokenizer: Path) -> Iterator[Frontend]:
    with running("openai_llm", tokenizer, ["--backend", "vllm"]) as started:
        yield started


@pytest.fixture(scope="module")
def client(frontend: Frontend) -> Iterator[Any]:
    with openai_client(frontend) as made:
        yield made


def test_models_list_and_retrieve(client, frontend):
    models = client.models.list()
    assert sorted((m.id, m.object, m.owned_by) for m in models.data) == \
        [(name, "model", "Triton Inference Server") for name in ("mock_trtllm", MODEL)]
    assert client.models.retrieve(MODEL).id == MODEL
    assert f"Found model: name='{MODEL}', backend='python'" in frontend.log  # read through Model.config()


def test_health_and_metrics(frontend):
    root = f"http://127.0.0.1:{frontend.ports['openai']}"
    with urllib.request.urlopen(f"{root}/health/ready", timeout=30) as reply:  # the engine asks Server.ready()
        assert reply.status == 200
    with urllib.request.urlopen(f"{root}/metrics", timeout=30) as reply:  # Server.metrics(), Prometheus text
        text = reply.read().decode()
    assert f'nv_inference_request_success{{model="{MODEL}",version="1"}}' in text


def test_completion(client):
    reply = client.completions.create(model=MODEL, prompt="one two three four five")
    assert reply.object == "text_completion" and reply.model == MODEL
    assert [(c.index, c.text, c.finish_reason) for c in reply.choices] == [(0, "five four three two one", "stop")]


def test_completion_sampling_parameters_and_echo_reach_the_model(client):
    # max_tokens and stop travel in the JSON of `sampling_parameters`, echo as `exclude_input_in_output`
    assert client.completions.create(model=MODEL, prompt="a b c d", max_tokens=2).choices[0].text == "d c"
    assert client.completions.create(model=MODEL, prompt="a b c d", stop="b").choices[0].text == "d c"
    assert client.completions.create(model=MODEL, prompt="a b c d", stop=["c", "a"]).choices[0].text == "d"
    assert client.completions.create(model=MODEL, prompt="a b c d", max_tokens=2, echo=True).choices[0].text == \
        "a b c dd c"


def test_token_usage(client):
    reply = client.completions.create(model=MODEL, prompt="one two three", max_tokens=2)
    if not COUNTS_TOKENS:
        assert reply.usage is None
    else:
        assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (3, 2, 5)


def test_completion_streamed(client):
    chunks = list(client.completions.create(model=MODEL, prompt="one two three", stream=True))
    assert [(c.choices[0].text, c.choices[0].finish_reason) for c in chunks] == \
        [("three", None), (" two", None), (" one", "stop")]
    assert len({c.id for c in chunks}) == 1


def test_completion_streamed_final_flag_alone(client):
    # no words: the model sends the final flag without a response; the frontend ends the stream with an empty text
    chunks = list(client.completions.create(model=MODEL, prompt="   ", stream=True))
    assert [(c.choices[0].text, c.choices[0].finish_reason) for c in chunks] == [("", "stop")]


def test_chat_completion_renders_the_template(client):
    reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "alpha beta"}])
    # the model saw "<user> alpha beta\n<assistant>" and answered its words reversed
    assert reply.object == "chat.completion"
    assert [(c.message.role, c.message.content, c.finish_reason) for c in reply.choices] == \
        [("assistant", "<assistant> beta alpha <user>", "stop")]


def test_chat_completion_streamed(client):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
    chunks = list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=3, stream=True))
    deltas = [(c.choices[0].delta.role, c.choices[0].delta.content, c.choices[0].finish_reason) for c in chunks]
    assert deltas == [("assistant", "", None), (None, "<assistant>", None), (None, " hello", None),
                      (None, " <user>", "stop")]


def test_model_error_and_unknown_model_refused(client):
    import openai

    with pytest.raises(openai.APIStatusError) as refused:
        client.completions.create(model=MODEL, prompt="a b", max_tokens=0)
    assert refused.value.status_code == MODEL_ERROR_STATUS
    # the frontend shows the error raised by the response iterator as str(error): as in Triton, its args are the
    # message and the response (tritonserver's _response.py adds the response to a response's error)
    assert refused.value.response.json()["detail"].startswith(
        "('mock_vllm: max_tokens must be at least 1, got 0', InferenceResponse(model={'name': 'mock_vllm'")
    with pytest.raises(openai.BadRequestError) as refused:
        client.completions.create(model="no_such_model", prompt="a b")
    assert refused.value.response.json() == {"detail": "Unknown model: no_such_model"}
    assert client.completions.create(model=MODEL, prompt="a b").choices[0].text == "b a"  # and it goes on


def test_kserve_frontends_beside_it(frontend):
    http_url = f"127.0.0.1:{frontend.ports['HTTPService']}"
    grpc_url = f"127.0.0.1:{frontend.ports['GRPCInferenceService']}"
    with httpclient.InferenceServerClient(http_url) as http:
        assert http.is_server_ready() and http.is_model_ready(MODEL)
        metadata = http.get_model_metadata(MODEL)
        assert [t["name"] for t in metadata["inputs"]][:4] == \
            ["text_input", "stream", "sampling_parameters", "exclude_input_in_output"]
        assert [t["name"] for t in metadata["outputs"]] == ["text_output", "num_input_tokens", "num_output_tokens"]
    # Triton's generate extension on the KServe HTTP port: the same model, one answer or a stream of events
    body = json.dumps({"text_input": "a b c", "sampling_parameters": json.dumps({"max_tokens": 2})}).encode()
    with urllib.request.urlopen(f"http://{http_url}/v2/models/{MODEL}/generate", body, timeout=30) as reply:
        assert json.loads(reply.read())["text_output"] == "c b"
    body = json.dumps({"text_input": "a b", "stream": True}).encode()
    with urllib.request.urlopen(f"http://{http_url}/v2/models/{MODEL}/generate_stream", body, timeout=30) as reply:
        events = [json.loads(line[len(b"data: "):]) for line in reply.read().splitlines() if line]
    assert [event["text_output"] for event in events] == ["b", " a"]
    replies: list[object] = []
    done = threading.Event()

    def collect(result: object, error: object) -> None:
        replies.append(error or result)
        if error is not None or result.get_response().parameters["triton_final_response"].bool_param:
            done.set()

    def request(prompt: str, parameters: str) -> list[grpcclient.InferInput]:
        tensors = [grpcclient.InferInput("text_input", [1], "BYTES"), grpcclient.InferInput("stream", [1], "BOOL"),
                   grpcclient.InferInput("sampling_parameters", [1], "BYTES")]
        tensors[0].set_data_from_numpy(np.array([prompt.encode()], dtype=np.object_))
        tensors[1].set_data_from_numpy(np.array([True]))
        tensors[2].set_data_from_numpy(np.array([parameters.encode()], dtype=np.object_))
        return tensors

    with grpcclient.InferenceServerClient(grpc_url) as grpc:
        grpc.start_stream(callback=collect)
        grpc.async_stream_infer(MODEL, request("x y z", "{}"), enable_empty_final_response=True)
        assert done.wait(30)
        assert [r.as_numpy("text_output").tolist() for r in replies] == [[b"z"], [b" y"], [b" x"]]
        replies.clear()
        done.clear()
        grpc.async_stream_infer(MODEL, request("x", "[1]"), enable_empty_final_response=True)
        assert done.wait(30)
        assert "mock_vllm: sampling_parameters is not a JSON object: [1]" in str(replies[0])
        grpc.stop_stream()


# ---- the TensorRT-LLM convention: what the frontend sends a model whose backend is not "vllm" --------------------
def test_trtllm_convention(tokenizer):
    with running("openai_llm", tokenizer, []) as trtllm, openai_client(trtllm) as client:
        assert "Found model: name='mock_trtllm', backend='python'" in trtllm.log
        # max_tokens and stop_words travel as tensors of their own, with a batch dimension (max_batch_size 4)
        assert client.completions.create(model="mock_trtllm", prompt="a b c d", max_tokens=1).choices[0].text == "d"
        assert client.completions.create(model="mock_trtllm", prompt="a b c d", stop=["b"]).choices[0].text == "d c"
        chunks = list(client.completions.create(model="mock_trtllm", prompt="one two three", stream=True))
        assert [(c.choices[0].text, c.choices[0].finish_reason) for c in chunks] == \
            [("three", None), (" two", None), (" one", "stop")]
        reply = client.chat.completions.create(model="mock_trtllm", messages=[{"role": "user", "content": "x y"}])
        assert reply.choices[0].message.content == "<assistant> y x <user>"
        chunks = list(client.chat.completions.create(model="mock_trtllm", stream=True,
                                                     messages=[{"role": "user", "content": "x"}]))
        assert [c.choices[0].delta.content for c in chunks] == ["", "<assistant>", " x", " <user>"]
        usage = client.completions.create(model="mock_trtllm", prompt="one two three", max_tokens=2).usage
        if COUNTS_TOKENS:  # the counts are INT32 here (UINT32 for mock_vllm): the frontend reads both
            assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (3, 2, 5)
        else:
            assert usage is None
