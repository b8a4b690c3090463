"""Configuration errors name the file, the key and the fix; the CLI prints them as one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from offsets_audit.cli import main
from offsets_audit.config import load_config, redacted
from offsets_audit.errors import UserError


def write(tmp_path, text):
    path = tmp_path / "audit.yaml"
    path.write_text(text)
    return path


def test_defaults_load_and_get_a_run_id():
    config = load_config()
    assert config["source"]["kind"] == "segments"
    assert config["broker"]["consumer_assignment_interval_ms"] == 1000
    assert config["run_id"]


def test_a_file_overrides_only_what_it_names(tmp_path):
    config = load_config(write(tmp_path, "output:\n  format: delta\nbroker:\n  group_overrides:\n    g1: {assignment_interval_ms: 0}\n"))
    assert config["output"]["format"] == "delta"
    assert config["output"]["path"] == "out"
    assert config["broker"]["group_overrides"] == {"g1": {"assignment_interval_ms": 0}}


def test_unknown_key_suggests_the_nearest_valid_one(tmp_path):
    with pytest.raises(UserError, match=r"unknown key 'output.fromat'; did you mean 'output.format'\?"):
        load_config(write(tmp_path, "output:\n  fromat: delta\n"))


def test_wrong_type_names_the_key(tmp_path):
    with pytest.raises(UserError, match="'broker.consumer_assignment_interval_ms' must be a whole number"):
        load_config(write(tmp_path, "broker:\n  consumer_assignment_interval_ms: soon\n"))


def test_enumerated_value_lists_the_choices(tmp_path):
    with pytest.raises(UserError, match="use one of: segments, parquet, kafka"):
        load_config(write(tmp_path, "source:\n  kind: files\n"))


def test_broken_yaml_names_the_line(tmp_path):
    with pytest.raises(UserError, match="not valid YAML at line"):
        load_config(write(tmp_path, "source:\n  kind: [segments\n"))


def test_missing_config_file_names_the_fix(tmp_path):
    with pytest.raises(UserError, match="pass --config"):
        load_config(tmp_path / "nope.yaml")


def test_secrets_are_redacted_before_printing():
    config = load_config(overrides={"source": {"kind": "kafka", "options": {
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
