"""A load's configuration override: bounded in size and nesting depth before it becomes a ModelConfig."""

from __future__ import annotations

import json

import pytest

from pytriton.config.repository_limits import RepositoryLimits
from pytriton.exceptions import ServerError, Status
from pytriton.repository.overrides import parse_override

LIMITS = RepositoryLimits(max_config_bytes=1000, max_config_depth=4)


def test_a_configuration_within_bounds_is_parsed():
    config = parse_override("m", json.dumps({"name": "m", "parameters": {"k": {"string_value": "v"}}}), LIMITS)
    assert config.name == "m" and config.parameters["k"].string_value == "v"
    assert parse_override("m", b'{"max_batch_size": 4}', LIMITS).max_batch_size == 4


@pytest.mark.parametrize("text, problem", [
    ('{"name": "' + "x" * 1000 + '"}', "is 1012 bytes, larger than the limit of 1000 bytes"),
    ('{"name": "' + "é" * 500 + '"}', "is 1012 bytes, larger than the limit of 1000 bytes"),  # (bytes, not chars)
    ('{"parameters": {"a": {"b": {"c": {}}}}}', "is nested deeper than 4 levels"),
    ('{"a": [[[[[]]]]]}', "is nested deeper than 4 levels"),
    ("[" * 400 + "]" * 400, "is nested deeper than 4 levels"),
    ("{not json", "is not a valid model configuration in JSON"),
    ('{"no_such_field": 1}', "is not a valid model configuration in JSON"),
    ('{"name": "\\ud800"}', "is not a valid model configuration in JSON"),
    (5, "must be a string"),
])
def test_a_configuration_out_of_bounds_is_refused_naming_the_model(text, problem):
    with pytest.raises(ServerError) as info:
        parse_override("m", text, LIMITS)
    assert info.value.status is Status.INVALID_ARG
    assert info.value.message.startswith("failed to load 'm': the 'config' parameter ") and problem in info.value.message


def test_nesting_past_the_json_parsers_own_limit_is_refused_as_too_deep():
    text = '{"parameters": ' + '{"a": ' * 100_000 + "{}" + "}" * 100_001
    with pytest.raises(ServerError, match="nested deeper than 32 levels"):
        parse_override("m", text, RepositoryLimits(max_config_bytes=1 << 20))
