"""The nightly job on a Spark standalone cluster (a master and two workers on 127.0.0.1, spark-submit with the
package only in ``--py-files``) writes the tables it writes on ``local[2]``: from log segments to Parquet, from log
segments to Delta through Delta's own Spark writer, and from a live broker through Spark's ``kafka`` source
(``bench/cluster.py``, its jars resolved by Maven and handed over with ``--jars``).

Six spark-submit runs: opt in with ``OFFSETS_AUDIT_CLUSTER=1`` (``make test-cluster``).
"""

from __future__ import annotations

import os

import pytest
from script_modules import load_script

pytestmark = [pytest.mark.slow, pytest.mark.kafka,
              pytest.mark.skipif(not os.environ.get("OFFSETS_AUDIT_CLUSTER"),
                                 reason="set OFFSETS_AUDIT_CLUSTER=1 (make test-cluster) for the standalone cluster runs")]


def test_a_standalone_cluster_writes_the_tables_local_2_writes(kafka_broker, tmp_path, capsys, monkeypatch):
    import json
    from pathlib import Path

    import kafka_jars
    from real_kafka import run_to_the_end

    try:
        kafka_jars.spark_connector_jars()
    except kafka_jars.JarsUnavailable as error:
        pytest.skip(f"Spark's connector jars unavailable: {error}")
    run_to_the_end(kafka_broker, tmp_path / "scenarios", "cl", ["classic_eager", "consumer_uniform"])
    ending = json.dumps({"__consumer_offsets": {str(p): o for p, o in kafka_broker.end_offsets().items()}})
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "bench"))  # its `results` module
    bench = load_script("bench/cluster.py", "cluster_bench")
    code = bench.main(["--variants", "segments-parquet,segments-delta,kafka-parquet",
                       "--bootstrap-server", kafka_broker.bootstrap, "--ending-offsets", ending],
                      results_dir=tmp_path / "results")
    out = capsys.readouterr().out
    print(out)
    assert code == 0, out
    assert "OK: every table equal" in out and "stopped the master and both workers" in out
