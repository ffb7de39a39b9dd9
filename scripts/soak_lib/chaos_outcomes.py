"""What a failed call of the chaos soak means: a wrong answer, a hang, an error that one of the injected faults
explains (counted by the fault that explains it, not a failure), or an error nothing explains (a failure).

The explanations are read from the error's message: the server names what happened (a worker killed, an execution
timeout, a model being reloaded, a region not registered). An error from inside an ensemble or a BLS call carries the
step's or the callee's error, which is explained the same way.
"""

from __future__ import annotations

import re

WRONG = "wrong answer"
HANG = "hang"
UNEXPLAINED = "unexplained"

# (label, pattern): the fault each label names and the words the server uses for it.
_EXPLAINED = [
    ("worker killed", re.compile(r"killed by SIGKILL|it is being restarted|did not answer: its worker (died|exited)")),
    ("execution timeout", re.compile(r"did not finish an execution within the execution timeout")),
    ("model reloaded", re.compile(
        r"was stopped \(the model was unloaded or the server is stopping\)"
        r"|model '[^']+' (version \d+ )?is (not ready|being (re)?loaded|unavailable)"
        r"|Request for unknown model: '[^']+' (version \d+ )?is not (found|ready)"
        r"|model '[^']+' has no version ready")),
    ("region re-registered", re.compile(r"Unable to find (system )?shared memory region")),
]
# Only once a front-end process of the group was killed: the group stops and its connections go.
_FRONTEND_GONE = ("front-end process killed", re.compile(
    r"StatusCode\.UNAVAILABLE|StatusCode\.CANCELLED|onnection (refused|reset|aborted|closed)|Broken pipe"
    r"|RemoteDisconnected|ConnectionError|EOF|Socket closed|failed to connect|timed out|Timeout|stream removed"
    r"|\[Errno 1(04|11)\]|HTTPConnectionPool|GOAWAY|Server not ready|stream is no longer in valid state"
    r"|HTTPConnectionClosed|connection closed", re.IGNORECASE))
_WRAPPERS = [("ensemble step", re.compile(r"in ensemble '[^']+', ")), ("BLS callee", re.compile(r"bls: double failed: "))]


def explain(message: str, frontend_killed: bool = False) -> tuple[str, str]:
    """(category, label) of one error message: category WRONG, HANG, 'explained' or UNEXPLAINED; the label names
    the fault (prefixed with 'ensemble step: ' / 'BLS callee: ' when it came from there)."""
    if message.startswith("WrongResult"):
        return WRONG, WRONG
    if message.startswith("Hang"):
        return HANG, HANG
    where = ""
    for name, pattern in _WRAPPERS:
        if pattern.search(message):
            where = f"{name}: "
            break
    for label, pattern in _EXPLAINED + ([_FRONTEND_GONE] if frontend_killed else []):
        if pattern.search(message):
            return "explained", where + label
    return UNEXPLAINED, UNEXPLAINED
