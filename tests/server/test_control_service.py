"""The control service: control messages from the router become calls of ServerCore's public API, and every
request gets one reply (the result, or an error naming what was wrong)."""

from __future__ import annotations

import asyncio
import json

from pytriton.exceptions import ServerError, Status
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.control import LoadRequest, ModelReadyRequest, UnloadRequest
from pytriton.server.control_service import ControlService

CONFIG = TritonModelConfig(model_name="m", inputs=[TensorSpec("IN", "FP32", (-1,))],
                           outputs=[TensorSpec("OUT", "FP32", (-1,))])


class FakeRouter:
    address = "ipc:///run/fake/workers.sock"

    def __init__(self):
        self.on_control = None
        self.replies: list[tuple[bytes, dict]] = []

    def reply_control(self, identity: bytes, text: str) -> None:
        self.replies.append((identity, json.loads(text)))


class FakeModel:
    def __init__(self, ready: bool):
        self.ready = ready


class FakeRegistry:
    def __init__(self):
        self.models: dict[str, FakeModel] = {}

    def get(self, name: str) -> FakeModel:
        if name not in self.models:
            raise ServerError(Status.NOT_FOUND, f"Request for unknown model: '{name}' is not found")
        return self.models[name]


class FakeExternal:
    def __init__(self, config, timeout_s):
        self.config = config
        self.timeout_s = timeout_s

    def identities(self):
        return [f"{self.config.model_name}#0#x1"]


class FakeHost:
    """The worker host as the control service uses it: the router, and instance sources (recorded as tuples)."""

    tag = "0123abcd"
    inline_max = 4096
    address = FakeRouter.address

    def __init__(self):
        self.router = FakeRouter()

    def worker_pool(self, config, target):
        return ("pool", target)

    def external_instances(self, config, timeout_s):
        return FakeExternal(config, timeout_s)


class FakeCore:
    """ServerCore's public API as the control service uses it, recording the calls."""

    def __init__(self):
        self.host = FakeHost()
        self.router = self.host.router
        self.registry = FakeRegistry()
        self.calls: list[tuple] = []
        self.hold = asyncio.Event()
        self.hold.set()

    async def add_model(self, config, source):
        if isinstance(source, FakeExternal):
            self.calls.append(("add_model external", config.model_name, source.timeout_s))
            self.registry.models[config.model_name] = FakeModel(False)
            return
        target = source[1]
        self.calls.append(("add_model", config.model_name, target))
        await self.hold.wait()
        if target.endswith(":broken"):
            raise RuntimeError(f"model instance '{config.model_name}_0_0' failed to start")
        self.registry.models[config.model_name] = FakeModel(True)

    async def unload_model(self, name):
        self.calls.append(("unload_model", name))
        self.registry.models.pop(name, None)


def run(scenario):
    return asyncio.run(scenario())


def test_a_load_replaces_the_model_and_answers_with_the_servers_details():
    async def scenario():
        core = FakeCore()
        ControlService(core, core.host)
        core.router.on_control(b"c", LoadRequest(config=CONFIG, callable="tests.models:identity").to_json())
        while not core.router.replies:
            await asyncio.sleep(0.001)
        return core

    core = run(scenario)
    assert core.calls == [("unload_model", "m"), ("add_model", "m", "tests.models:identity")]
    ((identity, reply),) = core.router.replies
    assert identity == b"c"
    assert reply["ok"] is True and reply["op"] == "load" and reply["identities"] == []
    assert reply["server"]["address"] == FakeRouter.address and reply["server"]["tag"] == "0123abcd"
    assert reply["server"]["inline_max"] == 4096


def test_external_hosting_model_ready_and_unload():
    async def scenario():
        core = FakeCore()
        service = ControlService(core, core.host)
        load = await service.handle(LoadRequest(config=CONFIG, hosting="external", timeout_s=7.0))
        await asyncio.sleep(0)  # the model is added in the background
        before = await service.handle(ModelReadyRequest("m"))
        core.registry.models["m"].ready = True
        after = await service.handle(ModelReadyRequest("m"))
        await service.handle(UnloadRequest("m"))
        unknown = await service.handle(ModelReadyRequest("m"))
        return core, load, before, after, unknown

    core, load, before, after, unknown = run(scenario)
    assert load.identities == ["m#0#x1"]
    assert ("add_model external", "m", 7.0) in core.calls
    assert (before.ready, after.ready, unknown.ready) == (False, True, False)
    assert core.calls[-1] == ("unload_model", "m")


def test_bad_messages_and_failures_get_an_error_reply_and_touch_nothing():
    async def scenario():
        core = FakeCore()
        ControlService(core, core.host)
        messages = [
            json.dumps({"op": "unload"}),
            json.dumps({"op": "reboot"}),
            "{not json",
            LoadRequest(config=CONFIG, callable="tests.models:broken").to_json(),
        ]
        for index, text in enumerate(messages):
            core.router.on_control(f"c{index}".encode(), text)
        while len(core.router.replies) < len(messages):
            await asyncio.sleep(0.001)
        return core

    core = run(scenario)
    replies = dict(core.router.replies)
    assert replies[b"c0"] == {"v": 1, "op": "unload", "ok": False,
                              "error": "control 'unload': missing field 'model'"}
    assert replies[b"c1"]["op"] == "reboot" and "unknown control operation 'reboot'" in replies[b"c1"]["error"]
    assert replies[b"c2"]["op"] is None and "not JSON" in replies[b"c2"]["error"]
    assert replies[b"c3"] == {"v": 1, "op": "load", "ok": False,
                              "error": "RuntimeError: model instance 'm_0_0' failed to start"}
    assert core.calls == [("unload_model", "m"), ("add_model", "m", "tests.models:broken")]


def test_close_cancels_requests_in_progress_and_detaches_from_the_router():
    async def scenario():
        core = FakeCore()
        core.hold.clear()  # add_model will not finish by itself
        service = ControlService(core, core.host)
        core.router.on_control(b"c", LoadRequest(config=CONFIG, callable="tests.models:identity").to_json())
        while not core.calls or core.calls[-1][0] != "add_model":
            await asyncio.sleep(0.001)
        await service.close()
        return core

    core = run(scenario)
    assert core.router.replies == []
    assert core.router.on_control is None
