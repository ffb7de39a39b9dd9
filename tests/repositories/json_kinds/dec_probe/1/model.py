"""A decoupled model in Triton's own API: its CASE input chooses what the response sender does (an error response then
the final flag alone, an error response flagged final, an unknown flag, a send after the final one, a list returned
from execute after the final response, a list returned with nothing sent, an exception raised after the final flag),
so that tests/e2e/test_triton_parity.py compares what a client of tritonserver 2.51 and of pytriton receives."""

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _out(text):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([text.encode()], dtype=np.object_))])


def _attempt(call):
    try:
        call()
        return "ok"
    except Exception as exc:  # noqa: BLE001 - what the call raised is the answer
        return f"{type(exc).__name__}: {exc}"


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            case = pb_utils.get_input_tensor_by_name(request, "CASE").as_numpy()[0].decode()
            sender = request.get_response_sender()
            if case == "error_then_final":
                sender.send(_out("before"))
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("boom")))
                sender.send(_out("after"))
                sender.send(flags=FINAL)
            elif case == "error_with_final":
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("boom")), flags=FINAL)
            elif case == "unknown_flag":
                sender.send(_out(_attempt(lambda: sender.send(_out("x"), flags=12345))), flags=FINAL)
            elif case == "send_after_final":
                sender.send(_out("a"), flags=FINAL)
                sender.send(_out(_attempt(lambda: sender.send(_out("b")))))  # (raises: nothing goes out)
            elif case == "list_after_final":
                sender.send(_out("x"), flags=FINAL)
                return [_out("y")]
            elif case == "list_returned":
                return [_out("y")]
            elif case == "raise_after_final":
                sender.send(flags=FINAL)
                raise ValueError("raised after the final response")
        return None
