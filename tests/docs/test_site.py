"""The documentation site builds with `mkdocs build --strict` (mkdocs.yml, docs/): no broken link, no page left out
of the navigation, no warning of any kind; and it builds offline (no plugin that fetches at build time)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests._support.paths import REPO

pytest.importorskip("material", reason="needs mkdocs-material (the `docs` or `test` extra)")


def test_site_builds_strict_without_warnings(tmp_path):
    # No proxy and an unroutable one: a plugin that reached for the network would fail the build.
    env = dict(os.environ, HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="",
               NO_MKDOCS_2_WARNING="1")  # (mkdocs-material's banner about its successor; not about this site)
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "WARNING" not in output, output
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "guide" / "quickstart" / "index.html").is_file()


def test_only_offline_plugins():
    from mkdocs.config import load_config

    config = load_config(str(REPO / "mkdocs.yml"))
    assert set(config["plugins"]) <= {"search", "material/search"}, list(config["plugins"])
    assert config["theme"].get("font") is False, "web fonts are fetched by the browser from Google: keep font: false"
