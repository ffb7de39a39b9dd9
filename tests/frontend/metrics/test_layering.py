"""The metrics and HTTP front-ends share the HTTP/1.1 server (`pytriton.frontend.http1`), never each other."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module, other", [("pytriton.frontend.metrics.server", "pytriton.frontend.http"),
                                           ("pytriton.frontend.http.app", "pytriton.frontend.metrics")])
def test_front_end_imports_http1_not_the_other(module, other):
    code = (f"import sys, {module}; "
            f"print(sorted(m for m in sys.modules if m == '{other}' or m.startswith('{other}.')), "
            "'pytriton.frontend.http1' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "True"], out
