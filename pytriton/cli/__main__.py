"""`python -m pytriton.cli serve ...`: the `pytriton` command (also what the malloc re-exec runs)."""

from pytriton.cli.serve import main

main(prog_name="pytriton")  # usage says `pytriton`, as the installed command's does
