"""The lines of a `pytriton serve` log that the helpers read."""

from __future__ import annotations

import re

PORT_RE = re.compile(r"Started (GRPCInferenceService|HTTPService|Metrics Service|OpenAIService) at [^:]+:(\d+)")
"""A service's bound port: group 1 the service, group 2 the port."""
PID_RE = re.compile(r"started \(pid (\d+)\)")
"""A worker process the server started."""
TEMPLATE_RE = re.compile(r"worker template ready: process (\d+)")
"""A worker template the server started (pytriton/supervisor/template.py): the parent of the workers it forks."""
READY_LINE = "pytriton server ready"
"""Written once every service listens and every model is loaded."""
