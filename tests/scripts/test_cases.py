"""The case matrices and the choice of cases by option."""

from __future__ import annotations

import pytest
from bench_lib.cases import BATCHED_CASES, Case, expand_range, full_matrix, quick_matrix, select_cases


def test_full_matrix_is_every_combination_once():
    keys = [c.key for c in full_matrix()]
    assert len(keys) == len(set(keys)) == 8
    assert {(c.protocol, c.size, c.shm) for c in full_matrix()} == {
        (p, s, m) for p in ("grpc", "http") for s in ("small", "1mib") for m in ("none", "system")}


def test_quick_matrix_is_part_of_the_full_one():
    assert set(quick_matrix()) <= set(full_matrix())
    assert len(quick_matrix()) == 4


def test_case_names():
    case = Case("http", "1mib", "system")
    assert (case.key, case.label, case.model) == ("http-1mib-system", "HTTP, 1 MiB, system shm", "double_1mib")
    batched = Case("grpc", "small", "none", "dynamic")
    assert batched.key == "grpc-small-none-batched"
    assert batched.label == "gRPC, 16 floats, no shm, dynamic batching"
    assert batched.model == "double_small"


@pytest.mark.parametrize(("quick", "no_batching", "n_main", "n_batched"),
                         [(False, False, 8, 2), (True, False, 4, 0), (False, True, 8, 0)])
def test_select_by_mode(quick, no_batching, n_main, n_batched):
    main, batched = select_cases(quick, no_batching, None)
    assert (len(main), len(batched)) == (n_main, n_batched)


def test_select_by_keys_overrides_the_mode():
    main, batched = select_cases(True, True, "http-small-system,grpc-small-none-batched")
    assert main == [Case("http", "small", "system")]
    assert batched == [BATCHED_CASES[0]]
    with pytest.raises(ValueError, match="grpc-huge-none"):
        select_cases(False, False, "grpc-small-none,grpc-huge-none")


def test_expand_range():
    assert expand_range("1:8:7") == [1, 8]
    assert expand_range("8") == [8]
    assert expand_range("1:4") == [1, 2, 3, 4]


def test_16mib_cases_run_only_when_named_and_their_launch_serves_the_model():
    from bench_lib.cases import BATCHED_MODELS, MAIN_MODELS, full_matrix, models_of, select_cases

    assert all(c.size != "16mib" for c in full_matrix())
    main, batched = select_cases(False, False, "grpc-16mib-none-batched,http-16mib-system,grpc-small-none")
    assert [c.key for c in main] == ["grpc-small-none", "http-16mib-system"]
    assert [c.key for c in batched] == ["grpc-16mib-none-batched"]
    assert models_of(main, MAIN_MODELS) == MAIN_MODELS + ["double_16mib"]
    assert models_of(batched, BATCHED_MODELS) == BATCHED_MODELS + ["double_16mib"]
    assert models_of(full_matrix(), MAIN_MODELS) == MAIN_MODELS
