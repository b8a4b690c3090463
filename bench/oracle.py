"""Kafka's coordinator as the judge, at scale: thousands of random Kafka-made histories through the project.

    .venv/bin/python bench/oracle.py                                   # 10,000 histories, the first 1,000 through Spark too
    .venv/bin/python bench/oracle.py --histories 2000 --spark-histories 0 --version 4.2.1

Histories come from ``tests/oracle_scenarios.py`` (seeded) in batches; each batch runs with one broker config (the
brokers' defaults, an assignment interval of 0 or 3000 ms, ``range`` as the default assignor, in turn) and is
played through Kafka's ``GroupCoordinatorShard`` in one JVM (``tests/oracle.py``), one ``__consumer_offsets``
partition per history, then loaded back by Kafka's loader in a second JVM. Every history is checked through the
pure core (``tests/oracle_diff.py``: the replay against Kafka's state after every batch and at the end, the audit's
findings, trusted assignor re-runs, rebalance causes); the first ``--spark-histories`` go through
``offsets-audit check`` with Spark as well (no finding, no ``unknown`` cause, no mismatching trusted re-run).

The figures (histories, records, differences by kind, the histories that showed one, seconds per phase) are printed
and recorded with ``bench/results.py``; each history with a difference is kept in ``--keep`` (its scenario, for
``tests/oracle_minimise.py``) together with its log segment and Kafka's answers, since a history Kafka writes again
from the same scenario need not be the same history (the coordinator's timers and the clients' order are not all
seeded). A non-zero exit means a difference was found. SIGTERM stops a run early: the whole batches so far are
recorded, marked ``stopped_early`` with the number asked.
"""
from __future__ import annotations

import argparse
import io
import json
import shutil
import signal
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))

import oracle  # noqa: E402
import oracle_diff  # noqa: E402
import oracle_scenarios  # noqa: E402
from results import record  # noqa: E402

#: The broker configs the batches take in turn (one cluster per batch).
BROKER_CONFIGS = ({}, {"group.consumer.assignment.interval.ms": "0"}, {"group.consumer.assignment.interval.ms": "3000"},
                  {"group.consumer.assignors": "range,uniform"})


def _batch(seed: int, first: int, count: int, version: str, broker: dict) -> list[dict]:
    scenarios = oracle_scenarios.scenarios(seed, count, kafka_version=version, first=first, broker_configs=False)
    for s in scenarios:
        s["partition"] -= first
        if oracle_scenarios._version_key(version) >= (4, 4) or "group.consumer.assignors" in broker:
            s["broker"] = dict(broker)
    return scenarios


def _client_line(error) -> str:
    """A client's error answer as a difference line. Kafka's own failure on an online upgrade gets a kind of its
    own: a KIP-848 heartbeat joining a classic group whose first rebalance has not completed is answered
    UNKNOWN_SERVER_ERROR ("No value present": the coordinator reads an empty Optional while converting the
    group), so the figures count it by name instead of as the project's difference."""
    text = str(error)
    fields = error if isinstance(error, dict) else {}
    if (fields.get("kind") == "consumer" and fields.get("error") == "UNKNOWN_SERVER_ERROR"
            and fields.get("message") == "No value present"):
        return f"kafka_upgrade_error: {text}"
    return f"client: {text}"


def _keep(keep: Path, version: str, scenario: dict, logs: Path, differences: list[str]) -> None:
    """The scenario, its ``__consumer_offsets`` partition and Kafka's answers of a history with a difference."""
    keep.mkdir(parents=True, exist_ok=True)
    name = f"{version}-{scenario['name']}"
    (keep / f"{name}.json").write_text(json.dumps({"scenario": scenario, "differences": differences[:50]}, indent=1))
    folder = keep / name
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(logs / f"__consumer_offsets-{scenario['partition']}", folder / f"__consumer_offsets-{scenario['partition']}")
    for suffix in (".state.json", ".epochs.jsonl"):
        if (logs / "state" / f"{scenario['name']}{suffix}").exists():
            (folder / "state").mkdir(exist_ok=True)
            shutil.copy(logs / "state" / f"{scenario['name']}{suffix}", folder / "state")
    state = logs / "state" / f"{scenario['name']}.state.json"
    topics = json.loads(state.read_text())["topics"] if state.exists() else scenario.get("topics", [])
    (folder / "topics.json").write_text(json.dumps({"topics": topics}))


def _spark_check(spark, out: Path, scenarios: list[dict], version: str) -> list[str]:
    from offsets_audit import sinks
    from offsets_audit.audit.rules.assignor import CONFIDENCE_RANK
    from offsets_audit.cli import main

    import yaml

    broker = scenarios[0].get("broker") or {}
    snapshot = {"complete": True, "broker": broker,
                "groups": {g: c for s in scenarios for g, c in (s.get("group_configs") or {}).items()}}
    (out / "group-configs.json").write_text(json.dumps(snapshot))
    config = {"output": {"path": str(out / "tables"), "format": "parquet", "html_report": False},
              "broker": {"kafka_version": oracle_diff.kafka_line(version)},
              "check": {"fail_on": "info", "json_summary": str(out / "check.json")}}
    (out / "check.yaml").write_text(yaml.safe_dump(config))
    with redirect_stdout(io.StringIO()):
        code = main(["check", "--config", str(out / "check.yaml"), "--input", str(out / "logs"), "--input-format",
                     "segments", "--run-id", "bench", "--topic-metadata", str(out / "topics.json"),
                     "--group-configs", str(out / "group-configs.json")])
    if code == 130:
        # the command caught the SIGTERM/SIGINT meant for the bench (its exit status 130): the batch stops here
        raise KeyboardInterrupt

    def rows(name):
        return [r.asDict() for r in sinks.read_table(spark, str(out / "tables"), name, "bench", "parquet").collect()]

    lines = [f"spark finding: {f['rule']} group {f['group_id']}: {f['message']}" for f in rows("findings")
             if not oracle_diff.storm_is_kafkas(f["rule"], f["details"])]
    lines += [f"spark cause: group {r['group_id']} epoch {r['group_epoch']} unknown" for r in rows("rebalances")
              if "unknown" in (r["causes"] or [])]
    lines += [f"spark rerun: {r['group_id']} epoch {r['assignment_epoch']} differs" for r in rows("assignor_audit")
              if r["kind"] == "rerun" and not r["error"] and r["match"] is False
              and CONFIDENCE_RANK.get(r["confidence"], 0) >= CONFIDENCE_RANK["medium"]]
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--histories", type=int, default=10_000)
    parser.add_argument("--spark-histories", type=int, default=1_000, help="how many of them go through Spark too")
    parser.add_argument("--batch", type=int, default=250, help="histories per JVM run (and per Spark job)")
    parser.add_argument("--seed", type=int, default=20251)
    parser.add_argument("--first", type=int, default=0, help="the first history's number (a run continued from "
                        "another's whole batches plays the same histories under the same broker configs)")
    parser.add_argument("--version", default="4.4.0", help="the Kafka version of the oracle")
    parser.add_argument("--keep", default=str(BENCH / "results" / "oracle-differences"),
                        help="where the scenarios of histories with a difference are written")
    args = parser.parse_args(argv)

    spark = None
    if args.spark_histories > 0:
        from offsets_audit.spark_session import get_spark

        spark = get_spark("oracle-bench", extra_conf={"spark.sql.shuffle.partitions": "2"})
    totals = {"histories": 0, "records": 0, "batches": 0, "spark_histories": 0}
    seconds = {"write": 0.0, "load": 0.0, "pure": 0.0, "spark": 0.0}
    by_kind: dict[str, int] = {}
    failing: list[str] = []
    keep = Path(args.keep)
    started = time.monotonic()
    stopped_early = False
    # SIGTERM (or SIGINT) stops the run after recording the whole batches so far; a background run ignores SIGINT.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _run(args, spark, totals, seconds, by_kind, failing, keep, started)
    except KeyboardInterrupt:
        # An interrupted run records what finished (whole batches only), marked so, rather than nothing.
        stopped_early = True
    if spark is not None and totals["spark_histories"] < args.spark_histories:
        spark.stop()
    # The seconds are those of the whole batches the figures count (an interrupted batch's are left out).
    elapsed = seconds.pop("whole_batches", 0.0)
    figures = {**totals, "kafka_version": args.version, "differences": sum(by_kind.values()),
               "differences_by_kind": by_kind, "histories_with_differences": len(failing),
               "seconds": round(elapsed, 1), **{f"{k}_s": round(v, 1) for k, v in seconds.items()}}
    if stopped_early:
        figures["stopped_early"] = True
        figures["histories_asked"] = args.histories
    print(json.dumps(figures, indent=1))
    if failing:
        print("with differences (scenarios kept in " + str(keep) + "):", ", ".join(failing[:30]))
    record("oracle", figures)
    return 1 if failing else 0


def _run(args, spark, totals: dict, seconds: dict, by_kind: dict, failing: list, keep: Path, started: float) -> None:
    end = args.first + args.histories
    for number, first in enumerate(range(args.first, end, args.batch), start=args.first // args.batch):
        before = (dict(totals), dict(seconds), dict(by_kind), len(failing))
        try:
            _one_batch(args, spark, totals, seconds, by_kind, failing, keep, number, first)
        except KeyboardInterrupt:
            # The interrupted batch counts for nothing: the figures stay those of the whole batches before it.
            totals.update(before[0])
            seconds.update(before[1])
            by_kind.clear()
            by_kind.update(before[2])
            del failing[before[3]:]
            raise
        seconds["whole_batches"] = time.monotonic() - started
        print(f"{totals['histories']} histories, {totals['records']} records, differences {by_kind or 0}, "
              f"{seconds['whole_batches']:.0f} s", flush=True)


def _one_batch(args, spark, totals: dict, seconds: dict, by_kind: dict, failing: list, keep: Path, number: int,
               first: int) -> None:
    from offsets_audit.replay import replay_records
    from offsets_audit.sources.segments import read_segment

    count = min(args.batch, args.first + args.histories - first)
    broker = BROKER_CONFIGS[number % len(BROKER_CONFIGS)]
    scenarios = _batch(args.seed, first, count, args.version, broker)
    with tempfile.TemporaryDirectory(prefix="oracle-bench-") as tmp:
        out = Path(tmp)
        t = time.monotonic()
        summaries = oracle.write_histories(scenarios, out / "logs", version=args.version)
        seconds["write"] += time.monotonic() - t
        topics = [t for s in summaries for t in oracle.load_state(out / "logs", s["name"])["topics"]]
        (out / "topics.json").write_text(json.dumps({"topics": topics}))
        t = time.monotonic()
        loaded = {s["partition"]: s for s in oracle.replay_folder(
            out / "logs", out / "topics.json", epochs=True, version=args.version,
            broker_configs={"*": broker})}
        seconds["load"] += time.monotonic() - t
        t = time.monotonic()
        for s, summary in zip(scenarios, summaries):
            records = list(read_segment(out / "logs" / f"__consumer_offsets-{s['partition']}"
                                        / "00000000000000000000.log", s["partition"]))
            lines = oracle_diff.replay_differences(records, loaded[s["partition"]])
            lines += oracle_diff.audit_differences(replay_records(records), s,
                                                   oracle.load_state(out / "logs", s["name"]), args.version)
            lines += [_client_line(e) for e in summary["error_list"]]
            totals["records"] += summary["records"]
            if lines:
                failing.append(s["name"])
                _keep(keep, args.version, s, out / "logs", lines)
            for kind, n in oracle_diff.summarize(lines).items():
                by_kind[kind] = by_kind.get(kind, 0) + n
        seconds["pure"] += time.monotonic() - t
        if spark is not None and totals["spark_histories"] < args.spark_histories:
            t = time.monotonic()
            lines = _spark_check(spark, out, scenarios, args.version)
            seconds["spark"] += time.monotonic() - t
            totals["spark_histories"] += count
            for kind, n in oracle_diff.summarize(lines).items():
                by_kind[kind] = by_kind.get(kind, 0) + n
            if lines:
                failing.append(f"batch {number} (Spark): {lines[0]}")
                for s in scenarios:
                    named = [line for line in lines if f" {s['name']}." in line]
                    if named and s["name"] not in failing:
                        _keep(keep, args.version, s, out / "logs", named)
            if totals["spark_histories"] >= args.spark_histories:
                # The rest run through the pure core only: the Spark JVM's memory goes back now.
                spark.stop()
    totals["histories"] += count
    totals["batches"] += 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
