"""scripts/bench's in-process rows (bench_lib/inprocess.py): the model repository it writes is serve_double.py's
model, and a short real run measures every mode with correct outputs and leaves nothing behind."""

from __future__ import annotations

from bench_lib import inprocess


def test_repository_is_the_served_double_model(tmp_path):
    root = inprocess.write_repository(tmp_path)
    config = (root / "double_1mib" / "config.pbtxt").read_text()
    assert 'name: "double_1mib"' in config and "max_batch_size: 64" in config and "dims: [ 262144 ]" in config
    assert "dynamic_batching" not in config and "count: 1" in config
    assert (root / "double_small" / "1" / "model.py").read_text() == inprocess.MODEL_PY


def test_percentiles():
    assert inprocess.percentile([1.0, 2.0, 3.0, 4.0], 0.99) == 4.0
    row = inprocess.row("sync", "small", 1, [0.001, 0.003, 0.002], 0.5)
    assert (row["n"], row["throughput"], row["p50_us"], row["p99_us"]) == (3, 6.0, 2000.0, 3000.0)


def test_short_run_measures_every_mode():
    args = inprocess.parse_args(["--duration", "0.05", "--warmup", "0", "--sizes", "small",
                                 "--async-concurrency", "1,2"])
    result = inprocess.measure(args)
    assert result["problems"] == []
    assert [(r["mode"], r["concurrency"]) for r in result["rows"]] == [
        ("sync", 1), ("async", 1), ("async", 2), ("grpc", 1), ("http", 1)]
    assert all(r["n"] > 0 and 0 < r["p50_us"] <= r["p99_us"] and r["throughput"] > 0 for r in result["rows"])
