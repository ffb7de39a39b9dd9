"""deploy/prometheus checked by Prometheus' own promtool: the configuration loads the alert rules, the rules are
valid, and their unit tests (deploy/prometheus/alerts_test.yml) pass and cover every alert."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests._support.paths import REPO
from tests.deploy.prometheus import (
    CONFIG,
    JOB,
    PROMETHEUS_DIR,
    RULE_TESTS,
    RULES,
    _timestamp,
    alert_rules,
    tool,
    without_thresholds,
)


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([tool("promtool"), *args], capture_output=True, text=True, timeout=60, check=False,
                          cwd=cwd)


def test_the_configuration_is_valid_and_loads_the_alert_rules():
    result = promtool("check", "config", str(CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 1 rule files found" in result.stdout
    config = yaml.safe_load(CONFIG.read_text())
    assert [(CONFIG.parent / f).resolve() for f in config["rule_files"]] == [RULES.resolve()]
    assert [job["job_name"] for job in config["scrape_configs"]] == [JOB]


def test_the_alert_rules_are_valid():
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


def test_the_alert_rules_pass_their_unit_tests():
    result = promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_unit_test_where_it_fires_and_one_where_it_does_not():
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case["alert_rule_test"]:
            (fired if check["exp_alerts"] else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in alert_rules()}
    assert fired == names and quiet == names


def test_every_alert_has_a_severity_and_names_what_it_is_about():
    """severity critical or warning; a summary and a description that name the model (and its server), or for the
    server-wide alert the server."""
    for rule in alert_rules():
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        annotations = rule["annotations"]
        assert set(annotations) == {"summary", "description"}, rule["alert"]
        about = ("instance",) if rule["alert"] == "PytritonServerDown" else ("model", "version", "instance")
        for text in annotations.values():
            for label in about:
                if label != "version" or text is annotations["description"]:
                    assert f"$labels.{label}" in text, (rule["alert"], label, text)


def test_without_thresholds():
    assert without_thresholds("up{job=\"pytriton\"} == 0") == 'up{job="pytriton"}'
    assert without_thresholds('a{quantile="0.99"} / 1e6 > 0.5') == 'a{quantile="0.99"} / 1e6'
    assert without_thresholds("a > 10 and on (x) increase(b[5m]) == 0") == "a and on (x) increase(b[5m])"
    assert without_thresholds('sum(rate(c{reason!="CANCELED"}[5m]))\n  > 0.05\n') == \
        'sum(rate(c{reason!="CANCELED"}[5m]))\n'


def test_prometheus_times():
    assert _timestamp("2024-05-01T12:00:00Z") == 1714564800.0
    assert _timestamp("2024-05-01T14:00:00.5+02:00") == 1714564800.5
    assert abs(_timestamp("2024-05-01T12:00:00.123456789Z") - 1714564800.123456789) < 1e-6


def test_the_unit_tests_can_fail(tmp_path):
    """A rule changed (the error-rate threshold raised above the test's 6.25%) fails its unit test."""
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    text = RULES.read_text()
    assert text.count("> 0.05\n") == 1
    changed = text.replace("> 0.05\n", "> 0.07\n")
    (tmp_path / RULES.name).write_text(changed)
    result = promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert result.returncode != 0
    assert "alertname: PytritonHighErrorRate" in result.stdout + result.stderr


def test_yamllint_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "yamllint", "-f", "parsable", "-c", str(REPO / ".yamllint"),
                             str(PROMETHEUS_DIR)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
