"""A request's call chain: the executions that wait for it (a BLS request's maker, and the chain of what that
execution serves), so that a call back into a model on the chain runs on a free instance or fails at once instead of
waiting for an instance that waits for it."""

from __future__ import annotations

from pytriton.core.types import Caller
from pytriton.scheduler.job import Reentry


def reentry(model_name: str, version: int, chain: tuple[Caller, ...]) -> Reentry | None:
    """What makes a request with `chain` a call back into version `version` of `model_name` (its instances on the
    chain, and the cycle to name), or None when no instance of it waits for the request."""
    blocked = frozenset(instance for name, number, instance in chain
                        if instance and name == model_name and number == version)
    if not blocked:
        return None
    first = next(index for index, (name, number, _) in enumerate(chain) if name == model_name and number == version)
    path = " -> ".join(f"'{name}'" for name, _, _ in chain[first:])
    return Reentry(blocked, f"BLS call cycle: {path} -> '{model_name}'")


def through_ensemble(chain: tuple[Caller, ...], ensemble: str, version: int) -> tuple[Caller, ...]:
    """The chain of an ensemble step's request: the ensemble's own (an ensemble has no instance to wait for; it is
    named so that a cycle through it reads as one). A client's request (no chain) keeps none: the hot path."""
    return (*chain, (ensemble, version, "")) if chain else chain


__all__ = ["reentry", "through_ensemble"]
