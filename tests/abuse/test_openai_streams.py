"""The OpenAI port under load and abuse: a client that leaves mid-stream stops its generation within one piece; a
client that never reads its stream holds the model back and is dropped after the body timeout; 256 concurrent
streamed chat completions of 200 pieces each all complete in order with bounded server memory while the rest of
the server keeps answering. Model: tests/openai_models.py `pieces` (a `@text_generator`)."""

from __future__ import annotations

import asyncio
import json
import socket

import openai
import pytest
import requests

from tests._support.paths import REPOSITORIES
from tests._support.rss import rss_bytes
from tests._support.serving import serve
from tests._support.waits import wait_for_file

MiB = 1024 * 1024


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


def test_a_client_that_leaves_mid_stream_stops_the_generation_within_one_piece(tmp_path):
    """The generator waits at piece 5 until the test says; the client has read pieces 0-4 and leaves; once the
    server has cancelled the request (its log says so), the generator is let go: it is closed at its next yield,
    having made one piece more than the client read, never a second."""
    gate, marker = tmp_path / "gate", tmp_path / "closed"
    with serve("tests.openai_models:pieces", "--openai-port", "0", "--log-level", "debug") as server, \
            openai.OpenAI(base_url=server.openai_url, api_key="x", max_retries=0, timeout=60) as client:
        stream = client.chat.completions.create(
            model="pieces", messages=[{"role": "user", "content": "x"}], stream=True,
            extra_body={"pieces": 1000, "gate_after": 5, "gate": str(gate), "marker": str(marker)})
        read = []
        for chunk in stream:
            if chunk.choices[0].delta.content:
                read.append(chunk.choices[0].delta.content)
            if len(read) == 5:
                break
        stream.close()  # (the connection is closed: the client left)
        assert read == [f"p{i} " for i in range(5)]
        assert server.wait_for_log("closed by its client after 5 pieces; its request is cancelled")
        gate.touch()
        wait_for_file(marker)
        assert marker.read_text() == "6"  # pieces 0-4 read, piece 5 made as the client left, then closed
        # the instance is free again
        answer = client.chat.completions.create(model="pieces", messages=[{"role": "user", "content": "x"}])
        assert answer.choices[0].message.content == "p0 p1 p2 p3 p4 "


def test_a_client_that_never_reads_is_dropped_and_its_generation_stopped(tmp_path):
    """An endless streamed completion on a connection that reads nothing: the server takes pieces from the model only
    as the client takes them (WRITE_HIGH unsent at most), so the model is held back; after the body timeout without
    progress the client is dropped and the generator closed."""
    marker = tmp_path / "closed"
    with serve("tests.openai_models:pieces", "--openai-port", "0", "--http-body-timeout", "1") as server:
        body = json.dumps({"model": "pieces", "prompt": "x", "stream": True, "pieces": -1,
                           "marker": str(marker)}).encode()
        before = rss_bytes(server.process.pid)
        with socket.create_connection(("127.0.0.1", _port(server.openai_url))) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%b" % (len(body), body))
            wait_for_file(marker)  # (never read: the server dropped us and the generator was closed)
        made = int(marker.read_text())
        growth = rss_bytes(server.process.pid) - before
        one = requests.post(f"{server.openai_url}/completions", timeout=30,
                            json={"model": "pieces", "prompt": "x", "stream": True, "pieces": 1})
        event_bytes = len(one.content.split(b"\n\n")[0]) + 2
        print(f"unread stream: the model made {made} pieces ({made * event_bytes / MiB:.1f} MiB of events) before "
              f"it was stopped; server RSS grew {growth / MiB:.1f} MiB")
        # What the kernel's send buffer (autotuned up to tcp_wmem's maximum) and the client's receive buffer take,
        # WRITE_HIGH (256 KiB) and the stream's window: never the endless stream.
        with open("/proc/sys/net/ipv4/tcp_wmem") as f:
            send_max = int(f.read().split()[2])
        assert made * event_bytes < send_max + 4 * MiB
        assert growth < 32 * MiB


STREAMS = 256
PIECES = 200
GATE_AFTER = 100
INSTANCES = 4


@pytest.mark.slow
def test_256_concurrent_streams_complete_in_order_while_the_server_keeps_answering(tmp_path):
    """256 streamed chat completions of 200 pieces at once (4 instances serve them, the rest wait in the model's
    queue). Those being generated stop at piece 100 until the test has checked, while they are held open, that the
    HTTP port, the models list and another model still answer; then every stream completes, its pieces in order,
    and the server's memory has grown by a bounded amount."""
    gate = tmp_path / "gate"
    with serve("tests.openai_models:pieces", "--instances", str(INSTANCES), "--openai-port", "0",
               "--model-repository", str(REPOSITORIES / "openai")) as server:
        pid = server.process.pid
        before = rss_bytes(pid)
        peak = [before]

        async def main() -> list[list[str]]:
            halfway = asyncio.Event()
            at_gate = [0]
            async with openai.AsyncOpenAI(base_url=server.openai_url, api_key="x", max_retries=0,
                                          timeout=300) as client:
                async def one(index: int) -> list[str]:
                    stream = await client.chat.completions.create(
                        model="pieces", messages=[{"role": "user", "content": f"stream {index}"}], stream=True,
                        extra_body={"pieces": PIECES, "gate_after": GATE_AFTER, "gate": str(gate)})
                    got: list[str] = []
                    async for chunk in stream:
                        if chunk.choices and chunk.choices[0].delta.content:
                            got.append(chunk.choices[0].delta.content)
                            if len(got) == GATE_AFTER:
                                at_gate[0] += 1
                                if at_gate[0] == INSTANCES:
                                    halfway.set()
                        elif chunk.choices and chunk.choices[0].finish_reason:
                            got.append(f"<{chunk.choices[0].finish_reason}>")
                    return got

                tasks = [asyncio.create_task(one(i)) for i in range(STREAMS)]
                await asyncio.wait_for(halfway.wait(), 120)
                # every instance holds an open stream, 252 more wait: the rest of the server still answers
                health = await asyncio.to_thread(requests.get, f"http://{server.http_url}/v2/health/live", timeout=30)
                assert health.status_code == 200
                assert len((await client.models.list()).data) == 5
                other = await client.completions.create(model="trtllm_like", prompt="meanwhile")
                assert json.loads(other.choices[0].text)["text_input"] == "meanwhile"
                peak[0] = max(peak[0], rss_bytes(pid))
                gate.touch()
                return await asyncio.wait_for(asyncio.gather(*tasks), 600)

        results = asyncio.run(main())
        after = rss_bytes(pid)
        expected = [f"p{i} " for i in range(PIECES)] + ["<stop>"]
        assert sum(r == expected for r in results) == STREAMS
        print(f"256 streams: server RSS {before / MiB:.0f} MiB before, {peak[0] / MiB:.0f} MiB with all open, "
              f"{after / MiB:.0f} MiB after")
        assert after - before < 64 * MiB
