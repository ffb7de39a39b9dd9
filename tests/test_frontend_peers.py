"""merge_metrics: the metrics port of several front-end processes as one Prometheus text."""

from __future__ import annotations

from pytriton._frontend_peers import merge_metrics

ZERO = """# HELP nv_inference_count Number of inferences
# TYPE nv_inference_count counter
nv_inference_count{model="m",version="1"} 3
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="m",version="1"} 10.5
# TYPE pytriton_model_instance_up gauge
pytriton_model_instance_up{model="m",version="1",instance="m_0_0"} 1
# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]
# TYPE nv_cpu_utilization gauge
nv_cpu_utilization 0.25
"""
ONE = """# HELP nv_inference_count Number of inferences
# TYPE nv_inference_count counter
nv_inference_count{model="m",version="1"} 4
nv_inference_count{model="only_here",version="1"} 1
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="m",version="1"} 2
# TYPE pytriton_model_instance_up gauge
pytriton_model_instance_up{model="m",version="1",instance="m_0_0"} 0
# HELP pytriton_custom a family only one process has
# TYPE pytriton_custom gauge
pytriton_custom 5
"""


def test_counters_summed_machine_gauges_once_instances_apart():
    text = merge_metrics([(0, ZERO), (1, ONE)])
    lines = text.splitlines()
    assert 'nv_inference_count{model="m",version="1"} 7' in lines
    assert 'nv_inference_count{model="only_here",version="1"} 1' in lines
    assert 'nv_inference_request_duration_us{model="m",version="1"} 12.5' in lines
    assert 'pytriton_model_instance_up{model="m",version="1",instance="m_0_0",frontend="0"} 1' in lines
    assert 'pytriton_model_instance_up{model="m",version="1",instance="m_0_0",frontend="1"} 0' in lines
    assert [line for line in lines if line.startswith("nv_cpu_utilization ")] == ["nv_cpu_utilization 0.25"]
    assert "pytriton_custom 5" in lines
    assert lines.count("# TYPE nv_inference_count counter") == 1
    assert lines.index("# TYPE nv_inference_count counter") < lines.index('nv_inference_count{model="m",version="1"} 7')


def test_one_process_is_its_own_text():
    assert merge_metrics([(0, ZERO)]).splitlines() == [
        line.replace('instance="m_0_0"}', 'instance="m_0_0",frontend="0"}') for line in ZERO.splitlines()]
