"""The decode and read benches' reference: Kafka's own decoder (``kafka-dump-log --offsets-decoder``) run over the
very records the bench times, written as segments."""

from __future__ import annotations

import subprocess

from kafka_broker import require_jars
from kafka_jars import DEFAULT_KAFKA_VERSION
from script_modules import load_script


def test_kafka_decodes_every_record_the_decode_bench_times(tmp_path):
    require_jars(DEFAULT_KAFKA_VERSION)
    read = load_script("bench/read.py", "offsets_audit_bench_read")
    decode = load_script("bench/decode.py", "offsets_audit_bench_decode")
    rows = decode.build_rows(500)
    segments = decode.write_segments(rows, tmp_path, batch_records=40)
    done = subprocess.run(read.kafka_dump_log_command(segments), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    printed = [line for line in done.stdout.splitlines() if line.startswith("| offset: ")]
    assert len(printed) == len(rows)
    # the offset commits, nine rows in ten, are what the ratios are about: Kafka decodes each of them
    commits = sum(1 for key, _ in rows if key[:2] == b"\x00\x01")
    assert sum(1 for line in printed if 'key: {"type":"1",' in line) == commits > 400


def test_kafka_times_its_own_assignors_on_the_assignor_benches_cases():
    """The assignor benches' same-run reference: Kafka's share and streams assignors, each on a golden case, one
    JVM per chunk; every case gets a wall time, and its thread CPU time where the JVM measures it."""
    import json

    from golden_files import GOLDEN, open_golden

    require_jars(DEFAULT_KAFKA_VERSION)
    kafka_assign = load_script("bench/kafka_assign.py", "offsets_audit_bench_kafka_assign")
    assert kafka_assign.available() is None
    cases = []
    for assignor in ("simple", "streams_sticky", "uniform"):
        with open_golden(GOLDEN / "assignors" / f"{assignor}.jsonl") as handle:
            first = next(json.loads(line) for line in handle if line.strip())
        cases.append((f"{assignor}-{first['case_id']}", assignor, first["input"]))
    measured = kafka_assign.times(cases, repeat=2)
    assert sorted(measured) == sorted(case_id for case_id, _, _ in cases)
    assert all(wall > 0 and (cpu is None or cpu >= 0) for wall, cpu in measured.values())
