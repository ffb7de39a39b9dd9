"""The `pytriton` program (the installed command and `python -m pytriton.cli`): restarts itself with glibc's malloc
tunables first, then runs the command. The restart comes before the server's modules are imported: importing them
is most of a start's CPU time, and a process that is about to be replaced would throw it away."""

from __future__ import annotations

import os
import sys

from pytriton.config import env as _env


def tune_malloc() -> None:
    """Re-execute once with glibc malloc tunables: large tensors then reuse heap memory instead of fresh mmaps
    (2.5-3x on 1 MiB paths, see the measurements); GLIBC_TUNABLES set by the user (or by the first run: the restarted
    process sees it) is left alone, as is PYTRITON_NO_MALLOC_TUNING=1."""
    tunables = _env.malloc_tunables()
    if tunables is None:
        return
    env = dict(os.environ, GLIBC_TUNABLES=tunables)
    try:
        os.execve(sys.executable, [sys.executable, "-m", "pytriton.cli", *sys.argv[1:]], env)
    except OSError:
        pass  # keep running untuned


def run() -> None:
    """The program's entry: the restart, then the command (usage says `pytriton`, as the installed command's does)."""
    tune_malloc()
    from pytriton.cli.serve import main  # (after the restart: see the module's docstring)

    main(prog_name="pytriton")
