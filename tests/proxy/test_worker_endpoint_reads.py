"""WorkerEndpoint reads its socket fewer times per request (no readiness check after a send, none in `starting` right
after the `receive` that read the socket empty); what the server sent in the meantime is still seen where it matters."""

from __future__ import annotations

import os
import secrets
import tempfile

import zmq

from pytriton.proxy.endpoint import WorkerEndpoint
from pytriton.proxy.messages import ServerToWorker, WorkerToServer


class _Pair:
    """A bare ROUTER standing in for the server, and one WorkerEndpoint connected to it."""

    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        address = f"ipc://{os.path.join(self.dir.name, 'r.ipc')}"
        self.ctx = zmq.Context()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        self.router.bind(address)
        self.identity = b"w-" + secrets.token_hex(4).encode()
        self.endpoint = WorkerEndpoint(address, self.identity, "t" + secrets.token_hex(4), os.getpid(),
                                       context=self.ctx)
        self.endpoint.send_hello()
        identity, header = self.router.recv_multipart()
        assert identity == self.identity
        assert WorkerToServer.FromString(header).kind == WorkerToServer.HELLO

    def send(self, **fields) -> None:
        self.router.send_multipart([self.identity, ServerToWorker(**fields).SerializeToString()])

    def arrived(self) -> None:
        """Wait (with a deadline) until a message waits in the worker's socket, without taking it."""
        assert self.endpoint._socket.poll(5000, zmq.POLLIN)

    def close(self) -> None:
        self.endpoint.close()
        self.router.close()
        self.ctx.term()
        self.dir.cleanup()


def test_a_cancel_that_comes_while_a_call_waits_in_the_backlog_still_stops_it():
    pair = _Pair()
    endpoint = pair.endpoint
    try:
        pair.send(kind=ServerToWorker.INFER, id=1)
        pair.send(kind=ServerToWorker.INFER, id=2)
        assert endpoint._await(lambda: len(endpoint._backlog) == 2, 5000)  # both read: call 2 waits behind call 1
        first = endpoint.receive(5000)
        assert first is not None and first[0].id == 1
        assert endpoint.starting(1)
        pair.send(kind=ServerToWorker.CANCEL, id=2)  # while call 1 runs
        pair.arrived()
        endpoint.send_result(1, None, error="done")
        assert pair.router.recv_multipart()[0] == pair.identity
        assert 2 not in endpoint._cancelled  # (the send did not read the socket: nobody else watches it)
        second = endpoint.receive(5000)
        assert second is not None and second[0].id == 2
        assert not endpoint.starting(2)  # its CANCEL is read before it starts
    finally:
        pair.close()


def test_a_cancel_read_before_its_call_stops_it_and_is_forgotten_once_a_later_call_starts():
    pair = _Pair()
    endpoint = pair.endpoint
    try:
        pair.send(kind=ServerToWorker.CANCEL, id=1)
        pair.send(kind=ServerToWorker.INFER, id=1)
        pair.send(kind=ServerToWorker.INFER, id=2)
        received = endpoint.receive(5000)
        assert received is not None and received[0].id == 1
        assert not endpoint.starting(1)
        received = endpoint.receive(5000)
        assert received is not None and received[0].id == 2
        assert endpoint.starting(2)
        assert not endpoint._cancelled
    finally:
        pair.close()


def test_one_request_costs_two_readiness_checks(monkeypatch):
    """receive: the check that finds the message and the one that finds the socket empty; starting and the result's
    send check nothing more (before: five checks per request)."""
    import pytriton.proxy.endpoint as endpoint_module

    pair = _Pair()
    endpoint = pair.endpoint
    checks = []
    real = endpoint_module.readable
    monkeypatch.setattr(endpoint_module, "readable", lambda socket: checks.append(1) or real(socket))
    try:
        pair.send(kind=ServerToWorker.INFER, id=1)
        pair.arrived()
        received = endpoint.receive(5000)
        assert received is not None and received[0].id == 1
        assert endpoint.starting(1)
        endpoint.send_result(1, None, error="done")
        assert pair.router.recv_multipart()[0] == pair.identity
        assert len(checks) == 2
    finally:
        pair.close()
