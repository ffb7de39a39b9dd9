"""`python -m pytriton.cli serve ...`: the `pytriton` command (also what the malloc re-exec runs)."""

from pytriton.cli.program import run

run()
