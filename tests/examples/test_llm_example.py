"""examples/llm runs as its README says: `pytriton serve examples.llm.model:tiny --openai-port ...`, then each
client in a process of its own; with the same prompt and max_tokens the curl script (generate_stream and
/v1/completions), the openai client (chat stream and completion) and the tritonclient gRPC stream print the same
continuation, and the completion's usage counts the prompt's characters."""

from __future__ import annotations

import json
import subprocess
import sys

from tests._support.paths import REPO
from tests._support.serving import serve

EXAMPLE = REPO / "examples" / "llm"
PROMPT = "the server"


def _run(*command: str) -> str:
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _sse(text: str, pick) -> str:
    out = []
    for block in text.split("\n\n"):
        if block.startswith("data: ") and block != "data: [DONE]":
            out.append(pick(json.loads(block[len("data: "):])))
    return "".join(out)


def test_every_client_gets_the_same_continuation():
    from examples.llm.model import tiny

    expected = "".join(tiny.__wrapped_generator__(PROMPT, {"max_tokens": 24}))
    assert len(expected) == 24
    with serve("examples.llm.model:tiny", "--openai-port", "0") as server:
        curl = _run(str(EXAMPLE / "client_curl.sh"), f"http://{server.http_url}",
                    server.openai_url.removesuffix("/v1"), PROMPT)
        generate, completions = curl.split("== /v1/completions\n")
        assert _sse(generate.split("== generate_stream\n")[1], lambda e: e["text_output"]) == expected
        assert _sse(completions, lambda e: e["choices"][0]["text"]) == expected

        printed = _run(sys.executable, str(EXAMPLE / "client_openai.py"), "--url", server.openai_url, "--prompt",
                       PROMPT).splitlines()
        assert printed[0] == "models: tiny"
        assert printed[1].startswith("chat: ") and len(printed[1]) == len("chat: ") + 24
        assert printed[2] == f"completion: {expected!r}"
        assert printed[3] == f"usage: prompt {len(PROMPT)}, completion 24, total {len(PROMPT) + 24}"

        grpc = _run(sys.executable, str(EXAMPLE / "client_grpc_stream.py"), "--url", server.grpc_url, "--prompt",
                    PROMPT)
        assert grpc == f"grpc: {expected}\n"
