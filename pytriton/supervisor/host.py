"""The worker side of a server: its transport (one ROUTER socket, the request arena) and the instance sources
built on it — worker pools of its own and instances hosted by other processes.

The server composes it with the core: the core gets instance sources, never this object.
"""

from __future__ import annotations

import os
from typing import Any

from pytriton.backends.model_log import MODEL_LOG_FILE, write_model_log_settings
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.proxy.arena import SHM_DIR, ShmArena, segment_name
from pytriton.proxy.router import ProxyRouter
from pytriton.supervisor.bls import BlsBridge
from pytriton.supervisor.custom_metrics import CustomMetricsBridge
from pytriton.supervisor.external import ExternalInstances
from pytriton.supervisor.model_loading import ModelLoadingBridge
from pytriton.supervisor.template import WorkerTemplate
from pytriton.supervisor.worker_pool import WorkerPool


class ReceiveSegments:
    """The segments large request messages are received into (the core's `SegmentSource`, core/received.py): one
    dedicated segment of the server's own per buffer, named `pytriton_<tag>_<pid>_rcv<id>`, its pages reserved."""

    def __init__(self, tag: str):
        self.arena = ShmArena(tag, "rcv", segment_size=0)  # (every allocation gets a segment of its own)

    def allocate(self, nbytes: int) -> tuple[str, int, memoryview]:
        """Refused (MemoryError) when it would leave less than half of /dev/shm free: the arenas the tensors travel
        in come first (a message not received into a segment is received into ordinary memory)."""
        info = os.statvfs(SHM_DIR)
        if (info.f_bavail * info.f_frsize - nbytes) * 2 < info.f_blocks * info.f_frsize:
            raise MemoryError(f"a receive segment of {nbytes} bytes would leave less than half of {SHM_DIR} free")
        segment_id, _, view = self.arena.allocate(nbytes)
        return segment_name(self.arena.tag, self.arena.owner_pid, "rcv", segment_id), segment_id, view

    def free(self, handle: int) -> None:
        self.arena.free(handle, 0)

    def close(self) -> None:
        self.arena.close()


class WorkerHost:
    """Owns the router; makes the instance sources of models."""

    def __init__(self, run_dir: str, tag: str, inline_max: int, log_level: str = "INFO", worker_template: bool = True):
        self.run_dir = run_dir
        # forks the workers of every pool (None: each worker starts in a fresh interpreter; PYTRITON_WORKER_TEMPLATE=0)
        self.template = WorkerTemplate() if worker_template else None
        self.tag = tag
        self.inline_max = inline_max
        self.log_level = log_level
        # where the server writes its logging settings when a client changes them, for the models' pb_utils.Logger
        self.model_log = os.path.join(run_dir, MODEL_LOG_FILE)
        self.router: ProxyRouter | None = None
        self.received: ReceiveSegments | None = None
        self._generation = 0

    @property
    def address(self) -> str:
        assert self.router is not None, "start() first"
        return self.router.address

    async def start(self) -> None:
        self.router = ProxyRouter(f"ipc://{self.run_dir}/workers.sock", self.tag, self.inline_max)
        self.received = ReceiveSegments(self.tag)

    def follow_log_settings(self, values: dict[str, Any]) -> None:
        """The server's logging settings changed (a client's POST /v2/logging, gRPC LogSettings): the models' log
        lines follow them from now on, in every worker."""
        write_model_log_settings(self.model_log, values)

    def serve_bls(self, infer: Any, infer_stream: Any) -> BlsBridge:
        """Serve the BLS requests of every worker with the core's `infer` and `infer_stream`."""
        assert self.router is not None, "start() first"
        return BlsBridge(self.router, infer, infer_stream)

    def serve_custom_metrics(self, store: Any) -> CustomMetricsBridge:
        """Keep the custom metrics (pb_utils.MetricFamily) of every worker in the core's `store`."""
        assert self.router is not None, "start() first"
        return CustomMetricsBridge(self.router, store)

    def serve_model_loading(self, control: Any, ready: Any) -> ModelLoadingBridge:
        """Serve the model loading API of every worker (pb_utils.load_model, ...) with the core's repository `control`
        and model `ready`; refused ("Server not ready") until the bridge is told the server has started."""
        assert self.router is not None, "start() first"
        return ModelLoadingBridge(self.router, control, ready)

    def worker_pool(self, config: TritonModelConfig, callable_target: str) -> WorkerPool:
        """Worker processes of our own that import and run `callable_target`."""
        assert self.router is not None, "start() first"
        if self.template is not None:  # (started with the first pool: a server whose instances are all hosted
            self.template.start_soon()  # elsewhere (Triton.bind) has none; it imports while the pool gets ready)
        return WorkerPool(self.router, config, callable_target, log_level=self.log_level, template=self.template,
                          model_log=self.model_log)

    def external_instances(self, config: TritonModelConfig, ready_timeout_s: float = 300.0) -> ExternalInstances:
        """Instances another process hosts (Triton.bind threads); `identities()` says how they connect."""
        assert self.router is not None, "start() first"
        self._generation += 1
        return ExternalInstances(self.router, config, self._generation, ready_timeout_s)

    def unmap_regions(self, region_ids: list[int]) -> None:
        """Tell every worker to drop its mappings of these client regions."""
        if self.router is not None:
            self.router.broadcast_unmap(region_ids)

    async def stop_template(self) -> None:
        """Stop the worker template (after the pools stopped their workers)."""
        if self.template is not None:
            await self.template.stop()

    def close(self) -> None:
        if self.received is not None:
            self.received.close()
            self.received = None
        if self.router is not None:
            self.router.close()
            self.router = None
