"""``dump`` takes a live cluster's security settings from a Kafka client properties file (``--command-config``, as
Kafka's own tools do) or from environment variables (``${NAME}``), so a password never sits on the command line
where ``ps`` shows it while the dump runs."""

from __future__ import annotations

import pytest

from offsets_audit.cli import build_parser
from offsets_audit.commands.dump import source_config
from offsets_audit.errors import UserError


def _args(*extra: str):
    return build_parser().parse_args(["dump", "--bootstrap-server", "b1:9092", "--output", "/tmp/x", *extra])


def test_client_properties_become_kafka_options(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_PASSWORD", "s3cret")
    properties = tmp_path / "client.properties"
    properties.write_text("# the cluster's SASL settings\n"
                          "security.protocol=SASL_SSL\n"
                          "sasl.mechanism: SCRAM-SHA-512\n"
                          "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                          '    username="audit" password="${KAFKA_PASSWORD}";\n'
                          "! another comment\n")
    config = source_config(_args("--command-config", str(properties)))
    assert config["kafka.security.protocol"] == "SASL_SSL"
    assert config["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert config["kafka.sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                                'username="audit" password="s3cret";')


def test_an_option_value_may_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("JAAS", "x required;")
    assert source_config(_args("--kafka-option", "kafka.sasl.jaas.config=${JAAS}"))["kafka.sasl.jaas.config"] == \
        "x required;"
    monkeypatch.delenv("JAAS")
    with pytest.raises(UserError, match="names the environment variable JAAS, which is not set"):
        source_config(_args("--kafka-option", "kafka.sasl.jaas.config=${JAAS}"))


def test_an_unreadable_properties_file_is_one_line(tmp_path):
    with pytest.raises(UserError, match="cannot be read"):
        source_config(_args("--command-config", str(tmp_path / "missing.properties")))
    (tmp_path / "bad.properties").write_text("=novalue\n")
    with pytest.raises(UserError, match="line 1 is not key=value"):
        source_config(_args("--command-config", str(tmp_path / "bad.properties")))
