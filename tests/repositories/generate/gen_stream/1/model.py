import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _text(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("text_output", np.array([value.encode()], dtype=np.object_))])


class TritonPythonModel:
    def execute(self, requests):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        for request in requests:
            sender = request.get_response_sender()
            params = json.loads(request.parameters())
            text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0].decode()
            count = int(pb_utils.get_input_tensor_by_name(request, "n").as_numpy().reshape(-1)[0])
            if params.get("marker"):  # one response (none: `silent`), then wait (30 s at most) until the client left
                if not params.get("silent"):
                    sender.send(_text(f"{text} 0"))
                if params.get("started"):
                    open(params["started"], "w").close()
                deadline = time.monotonic() + 30
                while not sender.is_cancelled() and time.monotonic() < deadline:
                    time.sleep(0.01)
                if sender.is_cancelled():  # written whole, then renamed: a reader never sees it half-made
                    with open(params["marker"] + ".tmp", "w") as f:
                        f.write("cancelled")
                    os.replace(params["marker"] + ".tmp", params["marker"])
                sender.send(flags=final)
                continue
            if params.get("flood"):  # responses until the client has left (60 s at most), then the marker
                deadline = time.monotonic() + 60
                while not sender.is_cancelled() and time.monotonic() < deadline:
                    sender.send(_text(text))
                if sender.is_cancelled():
                    with open(params["flood"] + ".tmp", "w") as f:
                        f.write("cancelled")
                    os.replace(params["flood"] + ".tmp", params["flood"])
                sender.send(flags=final)
                continue
            fail_at = params.get("fail_at", -1)
            for step in range(count):
                if step == fail_at:
                    sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"gen_stream failed at {step}")),
                                flags=final)
                    break
                sender.send(_text(f"{text} {step}"))
            else:
                sender.send(flags=final)
        return None
