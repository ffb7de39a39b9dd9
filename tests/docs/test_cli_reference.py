"""docs/guide/cli.md documents every option of `pytriton serve`: the option names are read from the click command,
so an option added without a line on that page fails here."""

from __future__ import annotations

import dataclasses
import re

import click

from pytriton.cli.serve import serve
from tests._support.paths import REPO

PAGE = REPO / "docs" / "guide" / "cli.md"


def _options() -> list[click.Option]:
    return [param for param in serve.params if isinstance(param, click.Option)]


def _documented_rows() -> dict[str, str]:
    """Each option name written in code in the first cell of a table row, with the row's text."""
    rows: dict[str, str] = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `--"):
            continue
        first_cell = line.split(" | ")[0]
        for name in re.findall(r"`(--[a-z0-9-]+)", first_cell):
            rows[name] = line
    return rows


def test_every_option_of_serve_has_a_row():
    rows = _documented_rows()
    missing = [name for option in _options() for name in [*option.opts, *option.secondary_opts] if name not in rows]
    assert not missing, f"options of `pytriton serve` missing from {PAGE.relative_to(REPO)}: {missing}"


def test_no_row_for_an_option_that_does_not_exist():
    known = {name for option in _options() for name in [*option.opts, *option.secondary_opts]}
    stale = sorted(set(_documented_rows()) - known)
    assert not stale, f"{PAGE.relative_to(REPO)} documents options `pytriton serve` does not have: {stale}"


def test_the_documented_defaults_are_the_real_ones():
    """Where an option has a plain default (a number, an address, a level), its row shows that value."""
    rows = _documented_rows()
    checked = 0
    for option in _options():
        default = option.default
        if option.is_flag or option.multiple or isinstance(default, bool) or default is None:
            continue
        if not isinstance(default, (int, float, str)):
            continue
        text = f"{default:g}" if isinstance(default, float) else str(default)
        default_cell = rows[option.opts[0]].split(" | ")[1]
        assert f"`{text}`" in default_cell, (option.opts[0], text, default_cell)
        checked += 1
    assert checked >= 20  # the ports, addresses, limits and timeouts


def test_on_off_options_show_their_default_state():
    rows = _documented_rows()
    for option in _options():
        if option.secondary_opts and isinstance(option.default, bool):
            default_cell = rows[option.opts[0]].split(" | ")[1]
            expected = ("on", f"`{option.opts[0]}`") if option.default else ("off", f"`{option.secondary_opts[0]}`")
            assert default_cell.strip() in expected, (option.opts[0], default_cell)


def test_every_server_environment_variable_has_a_row():
    """The variables that set server settings (pytriton/config/env.py) are on the page too, with their defaults."""
    from pytriton.config import env as _env
    from pytriton.config.server import ServerConfig

    defaults = {field.name: field.default for field in dataclasses.fields(ServerConfig)}

    rows = {line.split(" | ")[0].removeprefix("| ").strip("`"): line
            for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("| `PYTRITON_")}
    missing = [variable.name for variable in _env.SERVER_VARIABLES if variable.name not in rows]
    assert not missing, f"environment variables missing from {PAGE.relative_to(REPO)}: {missing}"
    for variable in _env.SERVER_VARIABLES:
        if variable.name != "PYTRITON_EXIT_WITH_PARENT":  # a flag: 0 for `pytriton serve`, set by Triton()
            default = defaults[variable.field]  # (a flag's default is written as the variable's value: 1 or 0)
            written = int(default) if isinstance(default, bool) else default
            assert rows[variable.name].split(" | ")[1] == f"`{written}`", variable.name
