"""The ``spark:`` section is checked before a session starts: a master URL Spark cannot parse, a value Spark would
refuse for a key it parses as a number, a size, a boolean or a fraction, and a ``spark.*`` key a letter or two
away from a known one each end in one line naming the key and the fix, exit 2, never a JVM stack trace. Keys
the check does not know (Hadoop, catalogs, vendors' keys) pass as they are."""

from __future__ import annotations

import re

import pytest

from offsets_audit.cli import main
from offsets_audit.config import load_settings
from offsets_audit.errors import UserError


def _spark(conf: dict | None = None, master: str | None = None) -> dict:
    return {"spark": {**({"conf": conf} if conf is not None else {}), **({"master": master} if master else {})}}


@pytest.mark.parametrize("conf, expected", [
    ({"spark.sql.shuffle.partitions": "many"}, r"'spark.conf.spark.sql.shuffle.partitions' is 'many'; Spark takes "
                                               r"a whole number above 0 here"),
    ({"spark.sql.shuffle.partitions": 0}, r"whole number above 0"),
    ({"spark.driver.memory": "lots"}, r"'spark.conf.spark.driver.memory' is 'lots'; Spark takes a size here"),
    ({"spark.executor.memory": "1.5g"}, r"Spark takes a size here"),
    ({"spark.sql.adaptive.enabled": "yes"}, r"Spark takes true or false here"),
    ({"spark.memory.fraction": 2}, r"a fraction from 0 to 1"),
    ({"spark.sql.shufle.partitions": 4}, r"Spark has no key 'spark.sql.shufle.partitions'; did you mean "
                                         r"'spark.sql.shuffle.partitions'\?"),
    ({"spark.driver.memroy": "2g"}, r"did you mean 'spark.driver.memory'\?"),
])
def test_a_value_spark_would_refuse_or_a_misspelt_key_is_one_line(conf, expected):
    with pytest.raises(UserError, match=expected):
        load_settings(overrides=_spark(conf))


@pytest.mark.parametrize("master", ["lots", "local[two]", "localhost:7077"])
def test_a_master_url_spark_cannot_parse_is_one_line(master):
    with pytest.raises(UserError, match=rf"'spark.master' is '{re.escape(master)}'.*not a master URL Spark knows"):
        load_settings(overrides=_spark(master=master))


def test_good_values_and_keys_the_check_does_not_know_pass_as_they_are():
    conf = {"spark.sql.shuffle.partitions": 8, "spark.driver.memory": "2g", "spark.executor.memory": "512m",
            "spark.sql.autoBroadcastJoinThreshold": -1, "spark.sql.adaptive.enabled": True,
            "spark.ui.enabled": "false", "spark.memory.fraction": 0.6, "spark.driver.maxResultSize": "1GB",
            "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000", "spark.databricks.delta.optimizeWrite.enabled":
            "true", "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            "spark.sql.files.maxPartitionNum": 100, "spark.executor.memoryOverheadFactor": 0.2}
    for master in ("local", "local[*]", "local[4]", "local[2,3]", "local-cluster[2, 1, 1024]", "spark://h:7077",
                   "yarn", "k8s://https://h:6443"):
        settings = load_settings(overrides={"spark": {"master": master, "conf": conf}})
        assert settings.spark.master == master and dict(settings.spark.conf) == conf


def test_the_command_line_says_it_in_one_line_before_spark(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("spark:\n  conf:\n    spark.sql.shuffle.partitions: many\n")
    assert main(["run", "--config", str(config), "--input", str(tmp_path), "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'spark.conf.spark.sql.shuffle.partitions' is 'many'" in err, err
