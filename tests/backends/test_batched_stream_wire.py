"""What a worker sends for a decoupled Python-backend model's batch, against a real router (the worker loop in a thread
of this process): every RESULT holds an item per request, `absent` for those it brings nothing to, `final` on each
request's last; the call's own final message comes once every request has had its final flag, and the credit window
holds the messages of the whole batch."""

from __future__ import annotations

import asyncio
import os
import secrets
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from pytriton.backends import worker
from pytriton.backends.python_model import python_model_target
from pytriton.backends.spec import WorkerSpec
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.arena import our_segments
from pytriton.proxy.messages import RequestData, TensorData
from pytriton.proxy.router import ProxyRouter, response_slots
from tests._support.waits import woken_until

MODEL = '''
import threading
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        def answer(request):
            sender = request.get_response_sender()
            for value in range(int(request.get_input_tensor_by_name("N").as_numpy()[0])):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("V", np.array([value], dtype=np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        for request in requests:
            threading.Thread(target=answer, args=(request,)).start()
'''

CONFIG = TritonModelConfig(model_name="batched", inputs=[TensorSpec("N", "INT32", (1,))],
                           outputs=[TensorSpec("V", "INT32", (1,))], decoupled=True)


class Messages:
    """A router Call that keeps, per RESULT, each item as "absent", or its value, with "!" when it is final."""

    def __init__(self, link: Any):
        self.link = link
        self.items: list[list[str]] = []
        self.final = asyncio.get_running_loop().create_future()
        self._came = asyncio.Event()  # set by each message

    def on_reply(self, message: Any, frames: list[Any]) -> None:
        assert not message.error, message.error
        row = []
        for item in message.responses:
            if item.absent:
                text = "absent"
            else:
                text = str(np.frombuffer(frames[item.outputs[0].frame - 1].buffer, np.int32)[0])
            row.append(text + ("!" if item.final else ""))
        self.link.release(response_slots(message))
        if message.final:
            self.final.set_result(row)
        else:
            self.items.append(row)
        self._came.set()

    def on_gone(self, reason: str) -> None:
        self.final.set_exception(AssertionError(reason))

    async def until(self, count: int, timeout_s: float = 30.0) -> None:
        """Wait for `count` messages, woken by each reply."""
        await woken_until(self._came, lambda: len(self.items), count, "messages", timeout_s)


def _n(value: int) -> RequestData:
    return RequestData([TensorData("N", "INT32", (1,), np.array([value], dtype=np.int32).tobytes())], [], {})


def test_each_request_of_a_batch_is_answered_on_its_own_within_the_window(tmp_path: Path) -> None:
    version = tmp_path / "batched" / "1"
    version.mkdir(parents=True)
    (version / "model.py").write_text(MODEL)

    async def main() -> None:
        tag = secrets.token_hex(4)
        with tempfile.TemporaryDirectory() as run_dir:
            router = ProxyRouter(f"ipc://{run_dir}/w.sock", tag)
            link = router.add_link(b"b#0#x1", "batched_0_0")
            spec = WorkerSpec(address=router.address, identity="b#0#x1", tag=tag, server_pid=os.getpid(),
                              inline_max=router.inline_max, config=CONFIG, watch="none",
                              callable=python_model_target(str(version / "model.py")))
            stop = threading.Event()
            thread = threading.Thread(target=worker.serve, args=(spec, None, stop), daemon=True)
            thread.start()
            try:
                await asyncio.wait_for(link.hello, 10)
                messages = Messages(link)
                call_id = router.submit(link, [_n(20), _n(0), _n(3)], messages, window=(4, 0))
                await messages.until(4)
                await asyncio.sleep(0.2)  # an absence check: nothing past the window comes (slowness can only miss it)
                assert len(messages.items) == 4  # a window of messages, whichever requests they answer
                router.credit(link, call_id, 100)
                last = await asyncio.wait_for(messages.final, 10)
                assert last == []  # the call's own end, once every request has sent its final flag
                rows = messages.items
                assert all(len(row) == 3 for row in rows)
                for index, count in enumerate((20, 0, 3)):
                    column = [row[index] for row in rows]
                    answered = [item.rstrip("!") for item in column if item.rstrip("!") != "absent"]
                    assert answered == [str(v) for v in range(count)]  # its own responses, in order
                    finals = [i for i, item in enumerate(column) if item.endswith("!")]
                    assert len(finals) == 1 and all(item.startswith("absent") for item in column[finals[0] + 1:])
            finally:
                stop.set()
                await asyncio.get_running_loop().run_in_executor(None, thread.join, 10)
                router.close()
            assert list(our_segments(tag)) == []

    asyncio.run(main())


def test_a_request_that_could_not_run_hears_its_error_once_in_a_stream() -> None:
    """(Its client region was gone.) In the first message its error, final; in the stream's later ones nothing."""
    first = worker._with_failed(["", "region gone", ""], ["r0", "r2"], [False, True])
    assert first == (["r0", ([], "region gone", {}), "r2"], [False, True, True])
    later = worker._with_failed(["", "region gone", ""], ["r0", "r2"], None, later=True)
    assert later == (["r0", None, "r2"], [False, False, False])
    assert worker._with_failed(["", ""], ["r0", "r1"]) == (["r0", "r1"], None)
