"""Not decoupled, in Triton's own API: its CASE input chooses how the request is answered through its response
sender (Triton's Python backend lets a model that is not decoupled send one response through it):
`in_execute` (the response and the final flag, then execute returns None), `from_thread` (another thread sends them;
execute returns None), `final_first` (the final flag alone: refused, the error fails the request), `twice` (a second
response: refused, the client keeps the first), `sent_and_returned` (sent with the final flag, and another returned:
that one is not sent), `returned_then_sent` (returned; once the file the request parameter "gate" names exists, a
thread sends another, which is refused: it writes why into the file the parameter "record" names)."""

import json
import os
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _out(text):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([text.encode()], dtype=np.object_))])


def _send_later(sender, gate, record):
    deadline = time.monotonic() + 30
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        sender.send(_out("sent"), flags=FINAL)
        why = "sent"
    except pb_utils.TritonModelException as exc:
        why = str(exc)
    with open(record, "w") as file:
        file.write(why)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            case = pb_utils.get_input_tensor_by_name(request, "CASE").as_numpy()[0].decode()
            sender = request.get_response_sender()
            response = None
            if case == "in_execute":
                sender.send(_out("sent"), flags=FINAL)
            elif case == "from_thread":
                threading.Thread(target=lambda s=sender: s.send(_out("sent"), flags=FINAL)).start()
            elif case == "final_first":
                sender.send(flags=FINAL)
            elif case == "twice":
                sender.send(_out("first"))
                sender.send(_out("second"))
            elif case == "sent_and_returned":
                sender.send(_out("sent"), flags=FINAL)
                response = _out("returned")
            elif case == "returned_then_sent":
                parameters = json.loads(request.parameters())
                threading.Thread(target=_send_later, args=(sender, parameters["gate"], parameters["record"])).start()
                response = _out("returned")
            responses.append(response)
        return None if responses == [None] * len(requests) else responses
