"""The sequence batcher's command-line options (`--sequence-batching`, `--sequence-control`, ...) into the
model's `SequenceBatcher`."""

from __future__ import annotations

import click

from pytriton.exceptions import PyTritonError
from pytriton.model_config.datatypes import parse_datatype
from pytriton.model_config.sequence import (
    BOOLEAN_CONTROL_TYPES,
    ControlKind,
    SequenceBatcher,
    SequenceControl,
    SequenceState,
    SequenceStrategy,
)

CONTROL_HELP = ("KIND=NAME[:DTYPE[:FALSE,TRUE]]; KIND: start, end, ready or corrid; DTYPE: int32 (default), fp32 or "
                "bool for start/end/ready (FALSE,TRUE default 0,1), uint64 (default), int64, uint32, int32 or string "
                "for corrid")
_CORRID_TYPES = {"uint64": "UINT64", "int64": "INT64", "uint32": "UINT32", "int32": "INT32", "string": "BYTES"}


def parse_sequence_control(text: str) -> SequenceControl:
    """`--sequence-control KIND=NAME[:DTYPE[:FALSE,TRUE]]` as a SequenceControl; UsageError otherwise."""
    kind_text, _, rest = text.partition("=")
    kinds = {k.value.rsplit("_", 1)[1].lower(): k for k in ControlKind}
    kind = kinds.get(kind_text.strip().lower())
    name, _, rest = rest.partition(":")
    dtype_text, _, values = rest.partition(":")
    if kind is None or not name:
        raise click.UsageError(f"--sequence-control {text!r}: expected {CONTROL_HELP}")
    try:
        if kind is ControlKind.CORRID:
            datatype = _CORRID_TYPES.get(dtype_text.lower() or "uint64")
            if datatype is None or values:
                raise click.UsageError(f"--sequence-control {text!r}: corrid takes a DTYPE of "
                                       f"{', '.join(_CORRID_TYPES)} and no values")
            return SequenceControl(kind, name, datatype)
        datatype = BOOLEAN_CONTROL_TYPES.get(dtype_text.lower() or "int32", "")
        pair = tuple(_value(datatype, v) for v in values.split(",")) if values else (_value(datatype, "0"),
                                                                                      _value(datatype, "1"))
        return SequenceControl(kind, name, datatype, pair)  # type: ignore[arg-type]  # a (false, true) pair
    except (ValueError, PyTritonError) as exc:
        raise click.UsageError(f"--sequence-control {text!r}: {exc}") from None


STATE_HELP = ("INPUT=OUTPUT:DTYPE:SHAPE[:FILE]: the server keeps the model's output OUTPUT of a sequence and gives it "
              "back as input INPUT with the sequence's next request (implicit state; shape without batch dim); on "
              "START: FILE's raw data (row-major, shaped SHAPE with each -1 as 1), else zeros")


def parse_sequence_state(text: str) -> SequenceState:
    """`--sequence-state INPUT=OUTPUT:DTYPE:SHAPE[:FILE]` as a SequenceState; UsageError otherwise."""
    names, _, rest = text.partition(":")
    input_name, _, output_name = names.partition("=")
    parts = rest.split(":", 2)
    if not input_name or not output_name or len(parts) < 2:
        raise click.UsageError(f"--sequence-state {text!r}: expected {STATE_HELP}")
    try:
        datatype = parse_datatype(parts[0])
        dims = tuple(int(d) for d in parts[1].split(",")) if parts[1].strip() else ()
        state = SequenceState(input_name, output_name, datatype, dims)
        if len(parts) == 3 and parts[2]:
            with open(parts[2], "rb") as file:
                data = file.read()
            state = SequenceState(input_name, output_name, datatype, dims, state.start_shape, data)
        return state
    except (ValueError, OSError, PyTritonError) as exc:
        raise click.UsageError(f"--sequence-state {text!r}: {exc}") from None


def _value(datatype: str, text: str) -> int | float | bool:
    if datatype == "BOOL":
        return text.strip().lower() in ("1", "true")
    return float(text) if datatype == "FP32" else int(text)


def sequence_batcher_of(strategy: str | None, controls: tuple[str, ...], idle_us: int | None,
                        max_candidate_sequences: int | None, max_queue_delay_us: int | None,
                        preferred_batch_size: tuple[int, ...], states: tuple[str, ...] = ()) -> SequenceBatcher | None:
    """The SequenceBatcher the options describe (None without --sequence-batching; its other options need it)."""
    if strategy is None:
        given = [option for option, value in (("--sequence-control", controls), ("--sequence-idle-us", idle_us),
                                              ("--max-candidate-sequences", max_candidate_sequences),
                                              ("--sequence-state", states)) if value]
        if given:
            raise click.UsageError(f"{', '.join(given)} configure(s) the sequence batcher: give --sequence-batching")
        return None
    oldest = SequenceStrategy(strategy) is SequenceStrategy.OLDEST
    if not oldest and (max_candidate_sequences or preferred_batch_size):
        raise click.UsageError("--max-candidate-sequences and --preferred-batch-size are settings of the oldest "
                               "strategy (--sequence-batching oldest)")
    try:
        return SequenceBatcher(
            SequenceStrategy(strategy), idle_us or 0, tuple(parse_sequence_control(c) for c in controls),
            max_candidate_sequences=max_candidate_sequences or 1, preferred_batch_size=preferred_batch_size,
            max_queue_delay_microseconds=max_queue_delay_us or 0,
            states=tuple(parse_sequence_state(state) for state in states))
    except PyTritonError as exc:
        raise click.UsageError(str(exc)) from None
