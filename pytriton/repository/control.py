"""Model control of a served model repository (Triton's modes "explicit" and "poll"): loads, reloads and unloads
its models at run time, swapping a reloaded model in without dropping requests, and answers the repository index."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from tritonclient.grpc import model_config_pb2 as pb

from pytriton.config.repository_limits import RepositoryLimits
from pytriton.core.ensemble import TARGET_PREFIX as ENSEMBLE_TARGET
from pytriton.core.ensemble import Ensemble, ensemble_steps
from pytriton.core.server_core import ServerCore
from pytriton.exceptions import ServerError, Status, invalid_arg, unsupported
from pytriton.model_config.names import model_name_problem, shown
from pytriton.repository import ModelRepositoryError, RepositoryModel, load_versions, scan_repositories
from pytriton.repository.autocomplete import ForkServer
from pytriton.repository.config import PollFailure
from pytriton.repository.locks import NameLocks
from pytriton.repository.overrides import parse_override
from pytriton.repository.signatures import folder_signature, model_names, version_signature
from pytriton.repository.uploads import prune_uploads, write_upload

logger = logging.getLogger("pytriton.server")

# Triton's refusal of `*` beside other startup models (core's ModelRepositoryManager::Create; --load-model, startup_models)
WILDCARD_ONLY = "Wildcard model name '*' must be the ONLY startup model if specified at all."

MODES = ("none", "explicit", "poll")
DEFAULT_POLL_SECS = 15  # Triton's --repository-poll-secs default
CLOSE_WAIT_S = 10.0
STEP_WAIT_S = 120.0  # how long an ensemble's load waits for a load of one of its steps under way
DUPLICATE_REASON = "model appears in two or more repositories"
# How a refused upload says what turns uploads on (the server's option; the in-process API's Options field).
UPLOADS_OPTION = ("start the server with --allow-model-upload (TritonConfig.allow_model_upload, "
                  "tritonserver.Options.allow_model_upload) to allow it")
RETRY_MAX_S = 300.0  # poll mode: the longest a load whose instances failed to start waits for its next try


def retry_delay(poll_secs: float, failures: int) -> float:
    """Poll mode: how long after its `failures`-th failed start a load is tried again without an edit of its files:
    the next poll, then twice as long after each failure, at most RETRY_MAX_S (or one poll, if polls are rarer)."""
    return min(max(poll_secs, RETRY_MAX_S), poll_secs * cast(float, 2 ** min(failures - 1, 32)))


@dataclasses.dataclass
class _Version:
    """What the index says of one version of a model once a load of it was tried."""

    state: str = ""
    reason: str = ""
    # the files this version was last loaded from (poll mode reloads it on a change)
    signature: tuple[Any, ...] | None = None


@dataclasses.dataclass
class _Entry:
    """One model of the repositories once a load of it was tried: its versions, as the index lists them."""

    versions: dict[int, _Version] = dataclasses.field(default_factory=dict)
    signature: tuple[Any, ...] | None = None  # the model folder's files when it was last (re)loaded (poll mode)
    explicit: bool = True  # loaded by name (False: only as a step of an ensemble that was loaded)
    # poll mode: a load whose instances failed to start is tried again at `retry_at` (the controller's clock) although
    # its files did not change; `failures` in a row so far (0: none to try again)
    failures: int = 0
    retry_at: float = 0.0


class StartFailure(ServerError):
    """A load whose instances failed to start (a worker died or failed before it was ready): the same files may load
    on another try, so poll mode tries again."""


class _LoadCancelled(Exception):
    """A load whose instances were still starting when the server stopped."""


class ModelControl:
    """The repository extension's controller for model control modes "explicit" and "poll".

    Loads and unloads of one model run one at a time (its lock); other models' go on meanwhile. In mode "poll" a
    background task rescans the repositories every `poll_secs` and loads new or changed models and unloads removed
    ones; loads and unloads asked by clients are refused there, as Triton does.
    """

    def __init__(self, core: ServerCore, host: Any, folders: Sequence[str], mode: str,
                 poll_secs: float = DEFAULT_POLL_SECS, retire_timeout_s: float = 30.0, auto_complete: bool = True,
                 exit_on_error: bool = False, allow_uploads: bool = False, limits: RepositoryLimits | None = None,
                 upload_parent: str | None = None, backend_directory: str | None = None):
        if mode not in ("explicit", "poll"):
            raise ValueError(f"model control mode '{mode}' has no controller")
        self.core = core
        self.host = host  # pytriton.supervisor.host.WorkerHost: makes the worker pools
        self.folders = list(folders)
        self.mappings: dict[str, str] = {}  # model name -> its folder, for repositories registered with a mapping
        self._mapped_by: dict[str, str] = {}  # model name -> the repository whose mapping names it
        self.mode = mode
        self.poll_secs = poll_secs
        self.retire_timeout_s = retire_timeout_s
        self.auto_complete = auto_complete  # models' auto_complete_config completes their configuration
        self._forks: ForkServer | None = None  # while the models named at start load: their auto-complete's
        self.exit_on_error = exit_on_error  # a model that fails to load at start fails the start (Triton's option)
        self.allow_uploads = allow_uploads  # loads may give the model's files (`file:` parameters; off by default)
        self.limits = limits or RepositoryLimits()  # bounds of a load's configuration override and files
        self.upload_parent = upload_parent  # where uploads' folders go (the server's run directory)
        self.backend_directory = backend_directory  # where Python-based backends are (Triton's --backend-directory)
        self._entries: dict[str, _Entry] = {}
        self._lock = asyncio.Lock()  # (poll mode's rounds; close waits for it)
        self._names = NameLocks()  # a load or unload holds its model's lock: other models' go on meanwhile
        self._poller: asyncio.Task[Any] | None = None
        self._upload_dirs: list[str] = []
        self._uploads_loading: set[str] = set()  # the folders of loads waiting for their turn or under way
        self._closed = False
        self._starting: dict[asyncio.Future[Any], Any] = {}  # a load's replace_model tasks and their sources
        self._start_cancelled = False
        self._clock: Callable[[], float] = time.monotonic  # (poll mode's retries)

    # ---- life cycle ----------------------------------------------------------------------------
    async def start(self, load_models: Sequence[str] = ()) -> None:
        """Load the models named (`*`: all; mode "poll": all); a model that fails is shown UNAVAILABLE with its
        reason and the server starts anyway, unless `exit_on_error`. As Triton 2.51 (core's
        ModelRepositoryManager::Create): `*` with other names is an INVALID_ARG ServerError (WILDCARD_ONLY); a name not
        in the repositories is logged, and the others are loaded; then, with `exit_on_error`, a name not found or a
        model that failed is a ModelRepositoryError "failed to load all models: <which and why>" (in-process: Triton's
        InternalError "failed to load all models", these details as its cause)."""
        found = scan_repositories(self.folders, self.mappings)
        startup = set(load_models)
        missing: list[str] = []
        if self.mode == "explicit" and "*" in startup and len(startup) > 1:
            if self.exit_on_error:
                raise ServerError(Status.INVALID_ARG, WILDCARD_ONLY)
            logger.error("%s", WILDCARD_ONLY)  # (Triton then loads none of them and serves)
            names: list[str] = []
        elif self.mode == "poll" or "*" in startup:
            names = list(found)
        else:
            names = []
            for name in dict.fromkeys(load_models):
                if name in found:
                    names.append(name)
                else:
                    missing.append(name)
                    logger.error("failed to poll model '%s': model not found in any model repository.", shown(name))
        failures = [f"failed to poll model '{shown(n)}': model not found in any model repository." for n in missing]
        forks = self._forks = ForkServer()  # the start's auto-completes fork from one process (loads later: fresh)
        try:
            for name in names:
                entry = self._entries.get(name)
                if entry is not None and any(v.state == "READY" for v in entry.versions.values()):  # loaded as a step
                    entry.explicit = True
                    continue
                try:
                    await self._locked_load(name, found[name])
                except ServerError as exc:
                    logger.error("%s", exc)
                    failures.append(str(exc))
        finally:
            self._forks = None
            await asyncio.to_thread(forks.close)
        if failures and self.exit_on_error:  # (in-process: Triton's InternalError, these details as its cause)
            raise ModelRepositoryError("failed to load all models: " + " ".join(failures))
        if self.mode == "poll":
            self._poller = asyncio.ensure_future(self._poll_forever())

    async def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Stop polling, let a load under way register its model (so that the core's stop stops it too; at most
        `wait_s`, then a load whose instances are still starting is cancelled: they are killed and its client told
        that the server is stopping), and remove the folders of uploaded model files (the core stops the models)."""
        self._closed = True
        wait_s = min(wait_s, CLOSE_WAIT_S)
        starting = {task: source for task, source in self._starting.items() if not task.done()}
        if starting:
            await asyncio.wait(set(starting), timeout=wait_s)
            late = [task for task, source in starting.items() if not task.done() and self._still_starting(source)]
            if late:
                logger.warning("a model load was still starting its instances as the server stopped: cancelled")
                self._start_cancelled = True
                for task in late:
                    task.cancel()
                await asyncio.wait(set(late))
        try:
            await asyncio.wait_for(self._lock.acquire(), wait_s)
            self._lock.release()
            if not await self._names.idle(wait_s):
                raise asyncio.TimeoutError
        except asyncio.TimeoutError:
            logger.warning("a model load still runs as the server stops")
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
            self._poller = None
        for folder in self._upload_dirs:
            shutil.rmtree(folder, ignore_errors=True)
        self._upload_dirs.clear()

    # ---- the repository extension ----------------------------------------------------------------
    def unavailable(self) -> list[str]:
        def ready(name: str, number: int, version: _Version) -> bool:
            model = self.core.registry.find(name, number)
            return version.state == "READY" and model is not None and model.ready

        return [name for name, entry in self._entries.items()
                if any(v.reason != "unloaded" and not ready(name, n, v) for n, v in entry.versions.items())]

    def index(self, ready_only: bool) -> list[dict[str, str]]:
        names, duplicates = model_names(self.folders, self.mappings)
        result = []
        for name in sorted(names | set(self._entries)):
            if name in duplicates:  # as Triton: it cannot be loaded until one of them is removed
                if not ready_only:
                    result.append({"name": name, "version": "-1", "state": "UNAVAILABLE",
                                   "reason": DUPLICATE_REASON})
                continue
            entry = self._entries.get(name)
            if entry is None or not entry.versions:
                if not ready_only:
                    result.append({"name": name})
                continue
            for number in sorted(entry.versions):  # one entry per version, as Triton's
                version = entry.versions[number]
                state = version.state
                model = self.core.registry.find(name, number)
                if state == "READY" and (model is None or not model.ready):
                    state = "UNAVAILABLE"
                if ready_only and state != "READY":
                    continue
                result.append({"name": name, "version": str(number), "state": state}
                              | ({"reason": version.reason} if version.reason else {}))  # (as Triton: none if empty)
        return result

    async def load(self, name: str, parameters: dict[str, str | bytes]) -> None:
        if self.mode != "explicit":
            raise ServerError(Status.UNAVAILABLE, "explicit model load / unload is not allowed if polling is enabled")
        problem = model_name_problem(name)  # (Triton's check; the name also names an upload's folder)
        if problem is not None:
            raise invalid_arg(problem)
        files = {key[len("file:"):]: value for key, value in parameters.items() if key.startswith("file:")}
        if files and not self.allow_uploads:
            raise unsupported(f"failed to load '{name}': loading a model from files ('file:' parameters) is not "
                              f"allowed; {UPLOADS_OPTION}")
        override = parse_override(name, parameters["config"], self.limits) if "config" in parameters else None
        if files:
            if override is None:
                raise invalid_arg(f"failed to load '{name}': a model given as files ('file:' parameters) needs its "
                                  "configuration in the 'config' parameter")
            root, model_dir = write_upload(name, files, self.limits, self.upload_parent)
            self._upload_dirs.append(root)
            self._uploads_loading.add(root)
            try:
                await self._locked_load(name, model_dir, override)
            finally:
                self._uploads_loading.discard(root)
                self._prune_uploads()
            return
        model_dir = self._find(name)
        await self._locked_load(name, model_dir, override)
        self._prune_uploads()  # (a model given as files before, now loaded from the repository)

    def max_request_bytes(self, http: bool) -> int:
        return self.limits.max_request_bytes(self.allow_uploads, http)

    def register(self, folder: str, name_mapping: dict[str, str] | None = None) -> None:
        """Serve the models of repository `folder` too; `name_mapping` (model folder -> model name) serves those
        folders under the names given (their configurations' names are replaced), as Triton's registration does."""
        if folder in self.folders:
            raise ServerError(Status.ALREADY_EXISTS, f"model repository '{folder}' has already been registered")
        mapping: dict[str, str] = {}
        for subdir, name in (name_mapping or {}).items():
            if name in self.mappings or name in mapping:
                raise ServerError(Status.ALREADY_EXISTS, f"failed to register '{name}', there is a conflicting "
                                                         f"mapping for '{name}'")
            problem = model_name_problem(name)
            if problem is not None:
                raise invalid_arg(f"failed to register '{folder}': {problem}")
            mapping[name] = os.path.join(folder, subdir)
        self.folders.append(folder)
        self.mappings.update(mapping)
        self._mapped_by.update((name, folder) for name in mapping)

    def unregister(self, folder: str) -> None:
        """Stop offering the models of repository `folder` (models loaded from it stay loaded, as in Triton)."""
        if folder not in self.folders:
            raise invalid_arg(f"failed to unregister '{folder}', repository not found")
        self.folders.remove(folder)
        for name in [n for n, owner in self._mapped_by.items() if owner == folder]:
            del self.mappings[name], self._mapped_by[name]

    async def unload(self, name: str, unload_dependents: bool) -> None:
        """Unload a model; `unload_dependents`, for an ensemble: also the models of its steps that were loaded only
        for it (by a load of the ensemble) and that no other loaded ensemble uses (Triton's unload_dependents)."""
        if self.mode != "explicit":
            raise ServerError(Status.UNAVAILABLE, "explicit model load / unload is not allowed if polling is enabled")
        async with self._names(name):
            model = self.core.registry.find(name)
            try:
                await self._unload(name)
            finally:
                self._prune_uploads()
            if unload_dependents and model is not None and model.ensemble is not None:
                await self._unload_composing(model.ensemble)

    async def _unload_composing(self, ensemble: Ensemble) -> None:
        used = {step.model_name for m in self.core.registry if m.ensemble is not None for step in m.ensemble.steps}
        for step in ensemble.steps:
            entry = self._entries.get(step.model_name)
            if entry is not None and not entry.explicit and step.model_name not in used:
                composing = self.core.registry.find(step.model_name)
                async with self._names(step.model_name):
                    await self._unload(step.model_name)
                if composing is not None and composing.ensemble is not None:
                    await self._unload_composing(composing.ensemble)

    # ---- internals -----------------------------------------------------------------------------
    def _find(self, name: str) -> str:
        try:
            found = scan_repositories(self.folders, self.mappings)
        except ModelRepositoryError as exc:
            raise ServerError(Status.INTERNAL, f"failed to load '{name}', {exc}") from None
        if name not in found:
            raise ServerError(Status.INTERNAL, f"failed to load '{name}', failed to poll from model repository")
        return found[name]

    async def _locked_load(self, name: str, model_dir: str, override: pb.ModelConfig | None = None) -> None:
        async with self._names(name):
            await self._load(name, model_dir, override)

    async def _load_steps(self, ensemble: str, steps: list[str], loading: set[str]) -> None:
        """Load the models an ensemble's steps name that are in the repositories and not served yet (as Triton does;
        they are not loaded by name: `unload_dependents` of the ensemble unloads them). A step that fails to load
        is logged; the ensemble then fails its check against its steps."""
        try:
            found = scan_repositories(self.folders, self.mappings)
        except ModelRepositoryError:
            return
        for step in dict.fromkeys(steps):
            if step in loading or step not in found or self.core.registry.find(step) is not None:
                continue
            try:
                async with self._names.hold(step, STEP_WAIT_S):  # (its own load by a client may be under way)
                    if self.core.registry.find(step) is None:
                        await self._load(step, found[step], loading=loading, explicit=False)
            except asyncio.TimeoutError:
                logger.error("loading model '%s', a step of ensemble '%s': another load of it did not end within "
                             "%.0f s", step, ensemble, STEP_WAIT_S)
            except ServerError as exc:
                logger.error("loading model '%s', a step of ensemble '%s': %s", step, ensemble, exc)

    def _source(self, config: Any, target: str) -> Any:
        if target.startswith(ENSEMBLE_TARGET):
            return Ensemble(config, target[len(ENSEMBLE_TARGET):])
        return self.host.worker_pool(config, target)

    async def _load(self, name: str, model_dir: str, override: pb.ModelConfig | None = None,
                    keep_unchanged: bool = False, loading: set[str] | None = None, explicit: bool = True) -> None:
        """(Re)load the versions of `name` its policy selects and stop serving the others, without dropping a
        request; `keep_unchanged` (poll mode): a version served whose files have not changed is not reloaded. An
        ensemble's steps are loaded first when they are not served (`loading`: the ensembles being loaded)."""
        if self._closed:
            raise ServerError(Status.UNAVAILABLE, f"failed to load '{name}': the server is stopping")
        served = self.core.registry.find(name)
        if served is not None and name not in self._entries:
            raise invalid_arg(f"failed to load '{name}': a model of that name is served that is not from the model "
                              "repository")
        entry = self._entries.setdefault(name, _Entry(explicit=explicit))
        entry.explicit = entry.explicit or explicit
        entry.signature = folder_signature(model_dir)
        before = {number: dataclasses.replace(version) for number, version in entry.versions.items()}
        try:
            # in a thread: auto-complete waits for a child process running the model's auto_complete_config
            served_name = name if self.mappings.get(name) == model_dir else None  # a mapped folder: named so
            models = await asyncio.to_thread(load_versions, model_dir, override, self.auto_complete, served_name,
                                             self._forks, self.backend_directory)
            scheduling = models[-1].config.ensemble_scheduling
            if scheduling is not None:
                steps = [s.model_name for s in ensemble_steps(scheduling)]
                await self._load_steps(name, steps, (loading or set()) | {name})
        except PollFailure as exc:  # (as Triton: the folder's model is not found; the log says why)
            logger.error("Poll failed for model directory '%s': %s", name, exc)
            if not self._serving(name, before):
                entry.versions = {number: _Version("UNAVAILABLE", str(exc)) for number in (before or [1])}
            raise ServerError(Status.INTERNAL, f"failed to load '{name}', failed to poll from model repository"
                              ) from None
        except Exception as exc:  # noqa: BLE001 - a config or folder that cannot be served: the index shows why
            reason = str(exc)
            if not self._serving(name, before):
                entry.versions = {number: _Version("UNAVAILABLE", reason) for number in (before or [1])}
            raise ServerError(Status.INVALID_ARG, f"load failed for model '{name}': version {min(before or [1])} is "
                                                  f"at UNAVAILABLE state: {reason};") from None
        wanted = {m.config.model_version: m for m in models}
        signatures = {number: version_signature(entry.signature, number) for number in wanted}
        starting = [m for number, m in wanted.items() if not (
            keep_unchanged and self._serving(name, before, number) and before[number].signature == signatures[number])]
        for model in starting:  # LOADING is shown with the versions it loads
            if not self._serving(name, before, model.config.model_version):
                entry.versions[model.config.model_version] = _Version("LOADING")
            # else (Triton's background load): the version served stays READY until its replacement takes over,
            # so a reload leaves the server ready (strict readiness) and the model in the ready index
        try:
            results = await asyncio.gather(*(self._start(m) for m in starting), return_exceptions=True)
        except BaseException:
            entry.versions = before
            raise
        if any(isinstance(result, _LoadCancelled) for result in results):
            entry.versions = before
            raise ServerError(Status.UNAVAILABLE, f"failed to load '{name}': the server is stopping")
        failures: dict[int, str] = {}
        for model, result in zip(starting, results):
            number = model.config.model_version
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                entry.versions = before
                raise result
            if isinstance(result, Exception):
                failures[number] = str(result)
                if self._serving(name, before, number):
                    entry.versions[number] = before[number]  # it serves on
                else:
                    entry.versions[number] = _Version("UNAVAILABLE", failures[number])
            else:
                entry.versions[number] = _Version("READY", "", signatures[number])
        if failures:  # the versions no longer selected serve on until a load succeeds
            raise StartFailure(Status.INVALID_ARG, f"load failed for model '{name}': " + "".join(
                f"version {number} is at UNAVAILABLE state: {reason};" for number, reason in sorted(failures.items())))
        gone = [number for number in entry.versions if number not in wanted]
        for number in gone:
            if self.core.registry.find(name, number) is not None:
                entry.versions[number].state = "UNLOADING"
        try:
            await asyncio.gather(*(self.core.unload_model(name, self.retire_timeout_s, graceful=True, version=number)
                                   for number in gone))
        finally:
            for number in gone:
                entry.versions[number] = _Version("UNAVAILABLE", "unloaded")

    def _prune_uploads(self) -> None:
        targets = [str(getattr(m.source, "callable_target", "")) for m in self.core.registry]
        self._upload_dirs = prune_uploads(self._upload_dirs, self._uploads_loading, targets)

    def _serving(self, name: str, versions: dict[int, _Version], number: int | None = None) -> bool:
        """Whether version `number` (None: any version) of `name` was READY and is still served."""
        numbers = list(versions) if number is None else [number]
        return any(n in versions and versions[n].state == "READY" and self.core.registry.find(name, n) is not None
                   for n in numbers)

    async def _start(self, model: RepositoryModel) -> None:
        source = self._source(model.config, model.target)
        await self._replace(model.config.model_name, model.config, source)

    async def _replace(self, name: str, config: Any, source: Any) -> None:
        """core.replace_model in a task of its own, which close() cancels while the instances still start; the
        cancellation is the load's error (UNAVAILABLE: the server is stopping)."""
        task = asyncio.ensure_future(self.core.replace_model(config, source, self.retire_timeout_s))
        self._starting[task] = source
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()  # (Task.cancelling, Python 3.11+: whether the caller was cancelled too)
            caller_cancelled = bool(getattr(current, "cancelling", lambda: 0)())
            if self._start_cancelled and task.cancelled() and not caller_cancelled:
                raise _LoadCancelled(name) from None
            raise
        finally:
            self._starting.pop(task, None)

    def _still_starting(self, source: Any) -> bool:
        """True until the model that `source` feeds is registered and loaded (then it is stopped as served)."""
        for model in self.core.registry:
            if model.source is source:
                return not model.loaded
        return True

    async def _unload(self, name: str) -> None:
        entry = self._entries.get(name)
        if entry is None:
            if self.core.registry.find(name) is not None:
                raise invalid_arg(f"failed to unload '{name}': the model is not served from the model repository")
            return  # as Triton: unloading a model that is not loaded is no error
        served = [m.version for m in self.core.registry.versions(name)]
        if not served:
            return
        for number in served:
            entry.versions.setdefault(number, _Version()).state = "UNLOADING"
        try:
            await self.core.unload_model(name, self.retire_timeout_s, graceful=True)
        finally:
            for number in served:
                entry.versions[number] = _Version("UNAVAILABLE", "unloaded")

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(self.poll_secs)
            try:
                async with self._lock:
                    await self._poll_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - polling goes on; the log says why this round failed
                logger.error("polling the model repository failed: %s", exc)

    async def _poll_once(self) -> None:
        """Load new and changed models, unload removed ones."""
        try:
            found = scan_repositories(self.folders, self.mappings)
        except ModelRepositoryError as exc:
            logger.error("polling the model repository: %s", exc)
            return
        for name, model_dir in found.items():
            entry = self._entries.get(name)
            failures = 0
            if entry is not None and entry.signature == folder_signature(model_dir):
                if not entry.failures or self._clock() < entry.retry_at:
                    continue
                failures = entry.failures  # its instances failed to start: tried again without an edit
                logger.info("model repository poll: trying model '%s' again (its instances failed to start %d "
                            "time%s in a row)", name, failures, "" if failures == 1 else "s")
            else:
                logger.info("model repository poll: %s model '%s'", "loading" if entry is None else "reloading", name)
            try:
                await self._load(name, model_dir, keep_unchanged=True)
                failures = 0
            except StartFailure as exc:
                failures += 1
                delay = retry_delay(self.poll_secs, failures)
                served = [str(m.version) for m in self.core.registry.versions(name)]
                logger.error("%s %s; trying again in %g s (no edit needed)", exc, f"version {', '.join(served)} "
                             "serves on" if served else "nothing of it is served", delay)
                self._entries[name].retry_at = self._clock() + delay
            except ServerError as exc:
                failures = 0  # (its files must change before it is tried again)
                logger.error("%s", exc)
            if name in self._entries:
                self._entries[name].failures = failures
        for name in [n for n in self._entries if n not in found]:
            logger.info("model repository poll: unloading model '%s' (its folder is gone)", name)
            await self._unload(name)
            del self._entries[name]


__all__ = ["DEFAULT_POLL_SECS", "MODES", "ModelControl", "folder_signature"]
