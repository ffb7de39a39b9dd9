"""An ensemble's config.pbtxt: what it is served as, and the refusals of Triton's ensemble rules (each naming the file
and the field) — those of the file itself when it is read, those against its steps' models when it is loaded."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pytriton.core.ensemble import Ensemble
from pytriton.exceptions import ServerError, not_found
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.repository import ModelRepositoryError, load_model, load_repositories

REPOS = Path(__file__).resolve().parents[1] / "repositories"

TENSORS = """
platform: "ensemble"
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


def step(model: str, inputs: dict[str, str], outputs: dict[str, str]) -> str:
    maps = "".join(f' input_map {{ key: "{k}" value: "{v}" }}' for k, v in inputs.items())
    maps += "".join(f' output_map {{ key: "{k}" value: "{v}" }}' for k, v in outputs.items())
    return f'{{ model_name: "{model}" model_version: -1{maps} }}'


def scheduling(*steps: str) -> str:
    return f"ensemble_scheduling {{ step [ {', '.join(steps)} ] }}"


ONE_STEP = scheduling(step("a", {"IN": "X"}, {"OUT": "Y"}))


def write(root: Path, config: str, name: str = "e") -> Path:
    model_dir = root / name
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(config)
    return model_dir


def test_the_test_repository_orders_ensembles_after_their_steps():
    models = load_repositories([str(REPOS / "ensembles")])
    names = [m.config.model_name for m in models]
    assert names.index("diamond") > max(names.index(n) for n in ("ens_plus_one", "ens_times_two", "ens_sum",
                                                                   "ens_text"))
    pipeline = next(m for m in models if m.config.model_name == "pipeline")
    assert pipeline.target.startswith("ensemble:") and pipeline.target.endswith("pipeline/config.pbtxt")
    steps = pipeline.config.ensemble_scheduling["step"]
    assert [(s["model_name"], s["model_version"]) for s in steps] == [("ens_plus_one", -1), ("ens_times_two", -1)]
    assert pipeline.config.to_triton_dict()["platform"] == "ensemble"


def test_an_ensemble_needs_no_model_file(tmp_path):
    assert load_model(str(write(tmp_path, TENSORS + ONE_STEP))).config.ensemble_scheduling is not None


@pytest.mark.parametrize("config, field, problem", [
    (TENSORS, "ensemble_scheduling.step", "must specify 'step' for ensemble 'e'"),
    (TENSORS + 'instance_group [ { kind: KIND_CPU } ]' + ONE_STEP, "instance_group",
     "instance group should not be specified for ensemble 'e'"),
    (TENSORS + 'backend: "python"' + ONE_STEP, "backend", "an ensemble has no backend"),
    (TENSORS.replace('platform: "ensemble"', 'backend: "python"') + ONE_STEP, "platform",
     "ensemble scheduling cannot be set for model 'e' whose platform is not ensemble"),
    (TENSORS + scheduling('{ input_map { key: "IN" value: "X" } output_map { key: "OUT" value: "Y" } }'),
     "ensemble_scheduling.step[0].model_name", "must specify 'model_name' in step 0"),
    (TENSORS + scheduling('{ model_name: "a" output_map { key: "OUT" value: "Y" } }'),
     "ensemble_scheduling.step[0].input_map", "must specify 'input_map' in step 0"),
    (TENSORS + scheduling(step("a", {"IN": "X"}, {"OUT": "Y"}), step("b", {"IN": "X"}, {"OUT": "Y"})),
     "ensemble_scheduling.step[1].output_map", "ensemble tensor 'Y' can appear in an output map only once"),
    (TENSORS + scheduling(step("a", {"IN": "X"}, {"OUT": "X"})), "ensemble_scheduling.step[0].output_map",
     "ensemble tensor 'X' is an input of ensemble 'e'"),
    (TENSORS + scheduling(step("a", {"IN": "Z"}, {"OUT": "Y"})), "input",
     "ensemble input 'X' for ensemble 'e' is not used"),
    (TENSORS + scheduling(step("a", {"IN": "X"}, {"OUT": "T"})), "output",
     "ensemble output 'Y' for ensemble 'e' is not written by any step"),
    (TENSORS + scheduling(step("a", {"IN": "X", "IN2": "U"}, {"OUT": "Y"})),
     "ensemble_scheduling.step[0].input_map",
     "output 'Y' for ensemble 'e' is not written: at least one of its depending tensors, 'U', is not connected"),
    (TENSORS + scheduling(step("a", {"IN": "X"}, {"OUT": "Y", "EXTRA": "T"})), "ensemble_scheduling.step[0].output_map",
     "ensemble tensor 'T' is unused in ensemble 'e'"),
    (TENSORS + scheduling(step("a", {"IN": "X", "IN2": "B"}, {"OUT": "A"}), step("b", {"IN": "A"}, {"OUT": "B"}),
                          step("c", {"IN": "A"}, {"OUT": "Y"})),
     "ensemble_scheduling.step[2].input_map", "is not written: at least one of its depending tensors"),
    (TENSORS + "ensemble_scheduling { max_inflight_requests: 4 step [ "
     + step("a", {"IN": "X"}, {"OUT": "Y"}) + " ] }", "ensemble_scheduling.max_inflight_requests",
     "is not supported yet"),
])
def test_invalid_ensembles_name_file_and_field(tmp_path, config, field, problem):
    model_dir = write(tmp_path, config)
    with pytest.raises(ModelRepositoryError) as info:
        load_model(str(model_dir))
    message = str(info.value)
    assert message.startswith(f"{model_dir / 'config.pbtxt'}: field '{field}' of model 'e': "), message
    assert problem in message


# ---- checks against the steps' models, when the ensemble loads ----------------------------------------------------


class _Served:
    def __init__(self, config: TritonModelConfig):
        self.config = config
        self.name = config.model_name
        self.ensemble = None
        self.ready = True


class _Registry:
    """The registry's `get` over a few configs (what the ensemble asks of it)."""

    def __init__(self, *configs: TritonModelConfig):
        self.models = {c.model_name: _Served(c) for c in configs}

    def get(self, name: str, version: str = ""):
        if name not in self.models or version not in ("", str(self.models[name].config.model_version)):
            raise not_found(f"no model {name!r}")
        return self.models[name]


def fp32(name: str, *dims: int) -> TensorSpec:
    return TensorSpec(name, "FP32", dims)


def model(name: str, inputs: list[TensorSpec], outputs: list[TensorSpec], **kwargs) -> TritonModelConfig:
    return TritonModelConfig(model_name=name, inputs=inputs, outputs=outputs, **kwargs)


def ensemble(tmp_path: Path, config: str) -> Ensemble:
    loaded = load_model(str(write(tmp_path, config)))
    return Ensemble(loaded.config, loaded.target[len("ensemble:"):])


STEP_A = model("a", [fp32("IN", -1)], [fp32("OUT", -1)])


def check(tmp_path: Path, config: str, *steps: TritonModelConfig) -> str:
    source = ensemble(tmp_path, config)
    source.registry = _Registry(*steps)  # type: ignore[assignment]
    with pytest.raises(ServerError) as info:
        asyncio.run(source.start())
    return info.value.message


def test_steps_that_fit_their_models_load(tmp_path):
    source = ensemble(tmp_path, TENSORS + ONE_STEP)
    source.registry = _Registry(STEP_A)  # type: ignore[assignment]
    asyncio.run(source.start())
    assert source.ready


@pytest.mark.parametrize("config, steps, field, problem", [
    (TENSORS + ONE_STEP, [], "ensemble_scheduling.step[0].model_name",
     "ensemble 'e' depends on 'a' which has no loaded version"),
    (TENSORS + ONE_STEP.replace("-1", "3"), [STEP_A], "ensemble_scheduling.step[0].model_name",
     "ensemble 'e' depends on 'a' whose required version 3 is not loaded"),
    (TENSORS + scheduling(step("a", {"IN": "X", "NOPE": "X"}, {"OUT": "Y"})), [STEP_A],
     "ensemble_scheduling.step[0].input_map", "ensemble tensor X is mapping to non-existing input NOPE in model a"),
    (TENSORS + ONE_STEP, [model("a", [fp32("IN", -1), fp32("IN2", -1)], [fp32("OUT", -1)])],
     "ensemble_scheduling.step[0].input_map", "input IN2 in model a is not mapped to any ensemble tensors"),
    (TENSORS + scheduling(step("a", {"IN": "X"}, {"NOPE": "Y"})), [STEP_A],
     "ensemble_scheduling.step[0].output_map", "ensemble tensor Y is mapped from non-existing output NOPE in model a"),
    (TENSORS + ONE_STEP, [model("a", [TensorSpec("IN", "INT32", (-1,))], [fp32("OUT", -1)])],
     "ensemble_scheduling.step[0].input_map", ("inconsistent data type: FP32 is inferred from model e while INT32 is "
                                               "inferred from model a")),
    (TENSORS + ONE_STEP, [model("a", [fp32("IN", 2, 3)], [fp32("OUT", -1)])], "ensemble_scheduling.step[0].input_map",
     "inconsistent shape: [-1] is inferred from model e while [2, 3] is inferred from model a"),
    (TENSORS + "max_batch_size: 8 " + ONE_STEP,
     [model("a", [fp32("IN", -1)], [fp32("OUT", -1)], max_batch_size=4)], "max_batch_size",
     "ensemble 'e' allows maximum batch size 8, but it contains model a which only allows maximum batch size to be 4"),
    (TENSORS + ONE_STEP, [model("a", [fp32("IN", -1)], [fp32("OUT", -1)], decoupled=True)],
     "ensemble_scheduling.step[0].model_name", "decoupled models in an ensemble are not supported yet"),
])
def test_steps_that_do_not_fit_their_models_are_refused(tmp_path, config, steps, field, problem):
    message = check(tmp_path, config, *steps)
    assert message.startswith(f"{tmp_path / 'e' / 'config.pbtxt'}: field '{field}' of ensemble 'e': "), message
    assert problem in message


def test_a_batching_ensemble_may_hold_a_model_without_batching_when_the_full_shapes_agree(tmp_path):
    """Triton's rule: [-1, 4] of a non-batching step matches [4] of a batching ensemble."""
    config = ('platform: "ensemble" max_batch_size: 4 input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ] '
              'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]' + ONE_STEP)
    source = ensemble(tmp_path, config)
    source.registry = _Registry(model("a", [fp32("IN", -1, 4)], [fp32("OUT", -1, 4)]))  # type: ignore[assignment]
    asyncio.run(source.start())


def test_an_ensemble_that_runs_itself_is_refused(tmp_path):
    """e's step is f, an ensemble whose step is e: a cycle (as a reload could make one)."""
    loaded = load_model(str(write(tmp_path, TENSORS.replace('"ensemble"', '"ensemble" name: "f"')
                                  + scheduling(step("e", {"X": "X"}, {"Y": "Y"})), name="f")))
    inner = Ensemble(loaded.config)
    outer = ensemble(tmp_path, TENSORS + scheduling(step("f", {"X": "X"}, {"Y": "Y"})))
    registry = _Registry(inner.config, outer.config)
    registry.models["f"].ensemble = inner
    registry.models["e"].ensemble = outer
    inner.registry = outer.registry = registry  # type: ignore[assignment]
    with pytest.raises(ServerError) as info:
        asyncio.run(outer.start())
    assert "ensemble 'e' depends on 'f', which runs ensemble 'e' itself: a cycle" in info.value.message
