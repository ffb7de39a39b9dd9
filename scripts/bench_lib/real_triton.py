"""The real tritonserver (2.51, the one the nvidia-pytriton 0.7.0 wheel bundles), run on a model repository.

The wheel holds ``pytriton/tritonserver/bin/tritonserver``, the Python backend (``backends/python``), one Python-
backend stub per Python version (``python_backend_stubs/<X.Y>``) and the server's shared libraries
(``nvidia_pytriton.libs``). To serve Python models it needs one backend folder holding the backend and the stub of
the venv's Python, that folder's libraries and the venv's ``libpython3.X.so`` on LD_LIBRARY_PATH, and the venv's
``bin`` first on PATH (the stub's numpy must be the venv's). The bench suites (vs_triton.py, many_models.py) and the
tests that compare with Triton (tests/_support/real_tritonserver.py) start it through this module.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import re
import shutil
import subprocess

STUB = "triton_python_backend_stub"
SHM_PREFIX = "triton_python_backend_shm_region_"  # the Python backend's /dev/shm segments


@dataclasses.dataclass(frozen=True)
class RealTriton:
    """The site-packages folder of a venv where nvidia-pytriton is installed."""

    site: pathlib.Path

    @classmethod
    def of_python(cls, python: pathlib.Path) -> RealTriton:
        """The install in the venv of `python` (a venv's bin/python); its site-packages found from its path."""
        venv = python.parent.parent
        found = sorted(venv.glob("lib/python3.*/site-packages"))
        return cls(found[0] if found else venv / "lib" / "python3" / "site-packages")

    @property
    def package(self) -> pathlib.Path:
        return self.site / "pytriton" / "tritonserver"

    @property
    def binary(self) -> pathlib.Path:
        return self.package / "bin" / "tritonserver"

    @property
    def venv_bin(self) -> pathlib.Path:
        return self.site.parents[2] / "bin"

    @property
    def python_version(self) -> str:
        """X.Y of the venv's Python, from its lib/pythonX.Y/site-packages path."""
        m = re.fullmatch(r"python(\d+\.\d+)", self.site.parent.name)
        return m.group(1) if m else ""

    def missing(self) -> str | None:
        """Why it cannot run here (None when it can): the files it needs, in words."""
        if not self.binary.exists():
            return f"no tritonserver at {self.binary} (pip install nvidia-pytriton==0.7.0 into that venv)"
        if not (self.package / "python_backend_stubs" / self.python_version / STUB).exists():
            return f"no Python-backend stub for Python {self.python_version or '?'} in {self.package}"
        if not self.libpython():
            return f"no libpython{self.python_version}.so beside the venv's Python (a Python built --enable-shared)"
        return None

    @functools.cache  # noqa: B019 (one instance per venv, a handful per run)
    def libdir(self) -> str:
        """The folder of the venv's libpython3.X.so (sysconfig LIBDIR of its Python); "" when it cannot say."""
        try:
            out = subprocess.run([str(self.venv_bin / "python"), "-c",
                                  "import sysconfig; print(sysconfig.get_config_var('LIBDIR'))"],
                                 capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return out.stdout.strip()

    def libpython(self) -> pathlib.Path | None:
        libdir = self.libdir()
        if not libdir:
            return None
        for name in (f"libpython{self.python_version}.so", f"libpython{self.python_version}.so.1.0"):
            if (pathlib.Path(libdir) / name).exists():
                return pathlib.Path(libdir) / name
        return None

    def stage_backends(self, folder: pathlib.Path) -> pathlib.Path:
        """`folder`/python: the Python backend with the stub of the venv's Python; returns `folder` (the
        --backend-directory). Staged once, kept when already there."""
        python = folder / "python"
        if not (python / STUB).exists():
            shutil.copytree(self.package / "backends" / "python", python, dirs_exist_ok=True)
            shutil.copy(self.package / "python_backend_stubs" / self.python_version / STUB, python)
        return folder

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """`base` (default: this process's environment) with the server's libraries and the venv's bin added."""
        env = dict(os.environ if base is None else base)
        libs = [str(self.site / "nvidia_pytriton.libs"), self.libdir(), env.get("LD_LIBRARY_PATH", "")]
        env["LD_LIBRARY_PATH"] = ":".join(p for p in libs if p)
        env["PATH"] = f"{self.venv_bin}:{env.get('PATH', '')}"
        return env

    def command(self, backends: pathlib.Path, repository: pathlib.Path, http_port: int, grpc_port: int,
                metrics_port: int, *args: str) -> list[str]:
        """tritonserver serving `repository`, every endpoint on loopback."""
        return [str(self.binary), "--backend-directory", str(backends), "--model-repository", str(repository),
                "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1", "--metrics-address", "127.0.0.1",
                "--http-port", str(http_port), "--grpc-port", str(grpc_port), "--metrics-port", str(metrics_port),
                *args]


def stub_regions(cmdline: str) -> list[str]:
    """The /dev/shm segment names a Python-backend stub's command line holds (each stub is told its region)."""
    return re.findall(rf"\b({SHM_PREFIX}\S+)", cmdline)
