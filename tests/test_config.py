"""Configuration errors name the file, the key and the fix; the CLI prints them as one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from offsets_audit.cli import main
from offsets_audit.config import load_settings, redacted
from offsets_audit.errors import UserError


def write(tmp_path, text):
    path = tmp_path / "audit.yaml"
    path.write_text(text)
    return path


def test_defaults_load_and_get_a_run_id():
    settings = load_settings()
    assert settings.source.kind == "segments"
    assert settings.broker.consumer_assignment_interval_ms == 1000
    assert settings.run_id


def test_a_file_overrides_only_what_it_names(tmp_path):
    config = load_settings(write(tmp_path, "output:\n  format: delta\nbroker:\n  group_overrides:\n    g1: {assignment_interval_ms: 0}\n"))
    assert config.output.format == "delta"
    assert config.output.path == "out"
    assert config.broker.group_overrides == {"g1": {"assignment_interval_ms": 0}}


def test_unknown_key_suggests_the_nearest_valid_one(tmp_path):
    with pytest.raises(UserError, match=r"unknown key 'output.fromat'; did you mean 'output.format'\?"):
        load_settings(write(tmp_path, "output:\n  fromat: delta\n"))


def test_wrong_type_names_the_key(tmp_path):
    with pytest.raises(UserError, match="'broker.consumer_assignment_interval_ms' must be a whole number"):
        load_settings(write(tmp_path, "broker:\n  consumer_assignment_interval_ms: soon\n"))


def test_enumerated_value_lists_the_choices(tmp_path):
    with pytest.raises(UserError, match="use one of: segments, parquet, kafka"):
        load_settings(write(tmp_path, "source:\n  kind: files\n"))


def test_source_reader_chooses_the_kafka_reader(tmp_path):
    from offsets_audit.sources.options import source_config

    settings = load_settings(write(tmp_path, "source:\n  kind: kafka\n  reader: spark\n  options:\n"
                                             "    kafka.bootstrap.servers: h:9092\n"))
    assert source_config(settings) == {"kind": "kafka", "reader": "spark", "kafka.bootstrap.servers": "h:9092"}
    assert "reader" not in source_config(load_settings(None, {"source": {"kind": "kafka", "options": {
        "kafka.bootstrap.servers": "h:9092"}}}))
    with pytest.raises(UserError, match="use one of: auto, spark, kafka-python"):
        load_settings(write(tmp_path, "source:\n  reader: java\n"))


def test_broken_yaml_names_the_line(tmp_path):
    with pytest.raises(UserError, match="not valid YAML at line"):
        load_settings(write(tmp_path, "source:\n  kind: [segments\n"))


def test_missing_config_file_names_the_fix(tmp_path):
    with pytest.raises(UserError, match="pass --config"):
        load_settings(tmp_path / "nope.yaml")


def test_secrets_are_redacted_before_printing():
    config = load_settings(overrides={"source": {"kind": "kafka", "options": {
        "kafka.bootstrap.servers": "b:9092", "kafka.sasl.jaas.config": "secret", "kafka.ssl.key.password": "pw"}}})
    shown = redacted(config)["source"]["options"]
    assert shown["kafka.bootstrap.servers"] == "b:9092"
    assert shown["kafka.sasl.jaas.config"] == "***" and shown["kafka.ssl.key.password"] == "***"


def test_cli_prints_one_line_and_exits_2_for_a_person_error(tmp_path, capsys):
    code = main(["run", "--config", str(write(tmp_path, "sources:\n  kind: parquet\n"))])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [f"offsets-audit: error: {tmp_path / 'audit.yaml'}: unknown key 'sources'; did you mean 'source'?"]


def test_cli_run_without_an_input_path_says_how_to_give_one(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "offsets_audit.cli", "run", "--input-format", "parquet",
                           "--output", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "offsets-audit: error: source.kind is parquet but source.path is not set; "
        "set source.path in the config or pass --input PATH")
    assert "Traceback" not in proc.stderr


def test_settings_are_typed_frozen_and_keyword_only():
    import dataclasses

    from offsets_audit.settings import OutputSettings, Settings

    settings = load_settings(overrides={"assignors": {"what_if": ["range"]}})
    assert isinstance(settings, Settings) and settings.assignors.what_if == ("range",)
    assert settings.rules["rebalance_storm"].threshold("max_per_hour") == 60
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.run_id = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        OutputSettings("out")  # type: ignore[misc]
    # the YAML form round-trips: the settings built from their own YAML form are the same
    assert load_settings(overrides=settings.as_dict()) == settings


@pytest.mark.parametrize("text, expected", [
    ("spark:\n  master: 123\n", r"'spark.master' must be text, not the number 123; quote it: master: \"123\""),
    ("run_id: 20240101\n", r"'run_id' must be text, not the number 20240101; quote it: run_id: \"20240101\""),
    ("run_id: 2024-01-01\n", r"'run_id' must be text, not the date 2024-01-01"),
    ("rules:\n  rebalance_storm: {max_per_hour: -5}\n", r"'rules.rebalance_storm.max_per_hour' is -5; it cannot be negative"),
    ("broker:\n  consumer_assignment_interval_ms: -1\n", r"cannot be negative; give 0 or more"),
    ("broker:\n  group_overrides: {g: {assignment_interval_ms: soon}}\n",
     r"'broker.group_overrides.g.assignment_interval_ms' is 'soon'"),
])
def test_a_mistake_in_a_value_names_the_key_and_the_fix(tmp_path, text, expected):
    with pytest.raises(UserError, match=expected):
        load_settings(write(tmp_path, text))


def test_config_given_a_directory_says_to_pass_the_file(tmp_path, capsys):
    assert main(["run", "--config", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"offsets-audit: error: --config {tmp_path} is a directory, not a YAML file; "
                   f"pass the file itself, e.g. --config {tmp_path / 'nightly.yaml'}"]
