"""Instance groups of a model configuration: the instances Triton makes of several groups (names, kinds, GPUs), the
groups as its configuration shows them, and a single group's instances as before."""

from __future__ import annotations

import pytest

from pytriton.exceptions import PyTritonModelConfigError
from pytriton.model_config.instance_groups import InstanceGroup, InstancePlace
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig

OUTPUTS = [TensorSpec("Y", "FP32", (1,))]
GROUPS = [InstanceGroup("m_0", "KIND_GPU", 2, (1, 0)), InstanceGroup("extra", "KIND_CPU", 1),
          InstanceGroup("m_2", "KIND_MODEL", 1)]


def test_several_groups_make_tritons_instances_in_its_order():
    config = TritonModelConfig("m", [], OUTPUTS, instance_groups=GROUPS)
    assert config.instance_places() == [
        InstancePlace("m_0_0", "GPU", 1), InstancePlace("m_0_0", "GPU", 0), InstancePlace("m_0_1", "GPU", 1),
        InstancePlace("m_0_1", "GPU", 0), InstancePlace("extra_0", "CPU"), InstancePlace("m_2_0", "MODEL")]
    assert config.instance_devices() == [1, 0, 1, 0, None, None]
    assert [p.device_id for p in config.instance_places()] == ["1", "0", "1", "0", "0", "0"]
    shown = config.to_triton_dict()["instance_group"]
    assert [(g["name"], g["kind"], g["count"], g["gpus"]) for g in shown] == [
        ("m_0", "KIND_GPU", 2, [1, 0]), ("extra", "KIND_CPU", 1, []), ("m_2", "KIND_MODEL", 1, [])]


def test_several_groups_travel_to_the_worker_and_back_from_tritons_json():
    config = TritonModelConfig("m", [], OUTPUTS, instance_groups=GROUPS)
    assert TritonModelConfig.from_dict(config.to_dict()).instance_places() == config.instance_places()
    assert TritonModelConfig.from_triton_dict(config.to_triton_dict()).instance_groups == GROUPS


def test_one_group_keeps_its_instance_names():
    assert [p.name for p in TritonModelConfig("m", [], OUTPUTS, instance_count=2).instance_places()] == ["m_0_0",
                                                                                                         "m_0_1"]
    gpu = TritonModelConfig("m", [], OUTPUTS, instance_count=2, gpus=[1, 0])
    assert [(p.name, p.kind, p.device) for p in gpu.instance_places()] == [
        ("m_1_0", "GPU", 1), ("m_1_1", "GPU", 1), ("m_0_0", "GPU", 0), ("m_0_1", "GPU", 0)]
    assert [p.kind for p in TritonModelConfig("m", [], OUTPUTS, kind_model=True).instance_places()] == ["MODEL"]


@pytest.mark.parametrize("group, problem", [
    (InstanceGroup("g", "KIND_MODEL", 1, (0,)), "instance group g of model m has kind KIND_MODEL but specifies one or "
                                                "more GPUs"),
    (InstanceGroup("g", "KIND_CPU", 0), "instance group g of model m: count must be >= 1, got 0"),
    (InstanceGroup("g", "KIND_GPU", 1), "instance group g of model m has kind KIND_GPU but lists no GPU"),
])
def test_an_invalid_group_is_refused(group, problem):
    with pytest.raises(PyTritonModelConfigError) as info:
        TritonModelConfig("m", [], OUTPUTS, instance_groups=[InstanceGroup("a", "KIND_CPU"), group])
    assert str(info.value) == problem
