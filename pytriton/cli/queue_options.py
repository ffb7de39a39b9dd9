"""`pytriton serve` flags for the dynamic batcher's queue policy (Triton's priority_levels, default_priority_level and
default_queue_policy): given to the command as one `queue_policy` argument, a dict of the flags that were given."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import click

from pytriton.model_config.common import DynamicBatcher, QueuePolicy, TimeoutAction

# option name -> (the DynamicBatcher or QueuePolicy field it sets, its flag)
_FLAGS = {
    "priority_levels": ("priority_levels", "--priority-levels"),
    "default_priority_level": ("default_priority_level", "--default-priority-level"),
    "max_queue_size": ("max_queue_size", "--max-queue-size"),
    "default_timeout_us": ("default_timeout_microseconds", "--default-timeout-us"),
    "allow_timeout_override": ("allow_timeout_override", "--allow-timeout-override"),
    "timeout_action": ("timeout_action", "--timeout-action"),
}
_BATCHER_FIELDS = ("priority_levels", "default_priority_level")


def queue_policy_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the queue-policy flags to `command`, which receives them as `queue_policy` (only those given)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["queue_policy"] = {name: value for name in _FLAGS if (value := kwargs.pop(name)) is not None}
        return command(*args, **kwargs)

    options = [
        click.option("--priority-levels", type=click.IntRange(min=0), default=None,
                     help="Dynamic batcher: the number of priority levels (1 is the most urgent); a request's "
                          "`priority` picks one. Turns dynamic batching on. Default: the declared one, else 0."),
        click.option("--default-priority-level", type=click.IntRange(min=0), default=None,
                     help="Dynamic batcher: the level of a request that gives no priority (or one past "
                          "--priority-levels)."),
        click.option("--max-queue-size", type=click.IntRange(min=0), default=None,
                     help="Queue policy: requests that may wait at one priority level; past it a request is refused "
                          "at once (UNAVAILABLE, HTTP 503: 'Exceeds maximum queue size'). 0 = no bound."),
        click.option("--default-timeout-us", type=click.IntRange(min=0), default=None,
                     help="Queue policy: how long a request may wait, in microseconds (0 = no limit); see "
                          "--timeout-action."),
        click.option("--allow-timeout-override/--no-allow-timeout-override", default=None,
                     help="Queue policy: a request's own `timeout` (microseconds) may shorten --default-timeout-us."),
        click.option("--timeout-action", type=click.Choice(["REJECT", "DELAY"], case_sensitive=False), default=None,
                     help="Queue policy: a request that waited past its timeout is rejected (UNAVAILABLE 'Request "
                          "timeout expired') or runs after those that did not (DELAY). Default: REJECT."),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def queue_flags_given(flags: dict[str, Any]) -> list[str]:
    """The flags among `flags` (as `queue_policy` holds them), for messages."""
    return [_FLAGS[name][1] for name in _FLAGS if name in flags]


def apply_queue_flags(batcher: DynamicBatcher, flags: dict[str, Any]) -> DynamicBatcher:
    """`batcher` with the queue-policy flags applied (the default queue policy: the declared one, else Triton's)."""
    policy = dataclasses.replace(batcher.default_queue_policy or QueuePolicy())
    changes: dict[str, Any] = {}
    for name, value in flags.items():
        field = _FLAGS[name][0]
        if name == "timeout_action":
            value = TimeoutAction(str(value).upper())
        if field in _BATCHER_FIELDS:
            changes[field] = value
        else:
            setattr(policy, field, value)
    if any(name not in _BATCHER_FIELDS for name in flags):
        changes["default_queue_policy"] = policy
    return dataclasses.replace(batcher, **changes)


__all__ = ["queue_policy_options", "queue_flags_given", "apply_queue_flags"]
