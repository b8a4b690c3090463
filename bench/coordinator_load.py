"""The coordinator-load estimate against Kafka's own assignors, and the interval what-if against Kafka's coordinator.

Run: ``.venv/bin/python bench/coordinator_load.py`` (both parts; ``factors`` or ``whatif`` for one). Needs Kafka's
jars (``make kafka``): Kafka's side runs in the oracle (``tests/oracle.py``).

``factors``: the job estimates an assignor run's coordinator time as its own re-run time (the executor thread's
CPU clock, as ``assignors.rerun`` takes it) times a per-assignor factor. Here both are taken on the same inputs:

* the cases: a ladder of generated groups (10 to 1,000 members, 60 to 50,000 partitions, homogeneous and
  heterogeneous subscriptions, a first assignment and the next one after 5 % of the members were replaced) for
  ``uniform``, ``range`` and the share ``simple`` assignor, and the largest golden cases of each assignor,
  ``streams_sticky`` included (Kafka-made inputs);
* ours: ``offsets_audit.assignors.run`` on a fresh copy of the input, the thread CPU time of the call, median of
  ``--repeat``;
* Kafka's: the oracle's ``assign`` (``tests/oracle.py``) in a JVM with a broker's compiler and collector, the
  calling thread's CPU time of the fastest of 10 calls per case (``java_thread_cpu_nanos``): like ours, a clock
  that a busy host does not stretch.

Per assignor the conversion is fitted as Kafka's = ``scale`` x ours ^ ``exponent`` (a plain factor is the exponent
1: it underrated the large runs, which are the ones that load a coordinator), with the 10th and 90th percentile of
Kafka's time over the estimate as its spread; ``--write-factors`` stores them in
``src/offsets_audit/audit/assignor_time_factors.json``, the file the job reads. The estimate's error per case is
estimate / Kafka's - 1: its median and 90th percentile of the absolute value, and the estimated and Kafka's total
over the cases, per assignor, are the figures recorded (beside the same for one plain median factor), with every
case's two times.

``whatif``: ``tests/interval_scenarios.py``'s churning consumer group written by Kafka's coordinator at intervals
0 and 5000 ms for ``--seeds`` seeds; from each interval-0 log the what-if predicts the 5 s log, and the differences
(assignments, and the bumps' time to assignment at p50, p95 and max) are recorded, with whether each log replays to
its own recorded computations exactly.
"""

from __future__ import annotations

import argparse
import copy
import json
import lzma
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from offsets_audit.assignors import run  # noqa: E402

FACTORS_PATH = REPO / "src" / "offsets_audit" / "audit" / "assignor_time_factors.json"
#: (members, topics, partitions) of the generated ladder
LADDER = ((10, 5, 60), (50, 20, 500), (200, 100, 5000), (1000, 1000, 50_000))
GOLDEN_LARGEST = 25
#: the job's assignor names for the golden files' (the streams re-run reports ``sticky``)
JOB_NAME = {"uniform": "uniform", "range": "range", "simple": "simple", "streams_sticky": "sticky"}


def ladder_cases() -> list[dict]:
    from assignors import next_step, synthetic_case  # bench/assignors.py

    cases = []
    for members, topics, partitions in LADDER:
        for heterogeneous in (False, True):
            step1 = synthetic_case(members, topics, partitions, heterogeneous=heterogeneous, seed=members)
            shape = "heterogeneous" if heterogeneous else "homogeneous"
            for assignor in ("uniform", "range", "simple"):
                step2 = next_step(step1, run(assignor, step1))
                for step, case in (("1", step1), ("2", step2)):
                    cases.append({"case_id": f"{assignor} {members}m/{partitions}p {shape} step {step}",
                                  "assignor": assignor, "input": case})
    return cases


def golden_cases() -> list[dict]:
    cases = []
    for name in ("uniform", "range", "simple", "streams_sticky"):
        with lzma.open(REPO / "tests" / "golden" / "assignors" / f"{name}.jsonl.xz", "rt", encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.strip()]
        lines.sort(key=lambda c: c.get("java_nanos") or 0, reverse=True)
        for c in lines[:GOLDEN_LARGEST]:
            cases.append({"case_id": f"golden {name} {c['case_id']}", "assignor": name, "input": c["input"]})
    return cases


def ours_ms(assignor: str, case_input: dict, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        fresh = copy.deepcopy(case_input)
        began = time.thread_time()
        run(assignor, fresh)
        samples.append((time.thread_time() - began) * 1e3)
    return statistics.median(samples)


def _quantile(values: list[float], q: float) -> float:
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


KAFKA_REPEAT = 10


def kafka_ms(cases: list[dict]) -> dict[str, float]:
    """Kafka's time per case (ms): the oracle's ``assign`` (``kafka_assign.times``), the calling thread's CPU time
    of the fastest of ``KAFKA_REPEAT`` calls (its wall time where the JVM gives no thread CPU time)."""
    import kafka_assign

    measured = kafka_assign.times(((c["case_id"], c["assignor"], c["input"]) for c in cases), KAFKA_REPEAT)
    return {case_id: (cpu or wall) * 1e3 for case_id, (wall, cpu) in measured.items()}


def fit(pairs: list[tuple[float, float]]) -> dict:
    """Kafka's time as ``scale * ours ** exponent`` (least squares in log-log space: Python's fixed cost per call
    weighs more in a small run, Kafka's JIT-compiled loops less), and the spread of Kafka's time around it (the 10th
    and 90th percentile of Kafka's / the estimate)."""
    xs = [math.log(o) for o, _ in pairs]
    ys = [math.log(k) for _, k in pairs]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    scale = math.exp(my - slope * mx)
    residuals = [k / (scale * o ** slope) for o, k in pairs]
    return {"scale": round(scale, 4), "exponent": round(slope, 4), "low": round(_quantile(residuals, 0.1), 3),
            "high": round(_quantile(residuals, 0.9), 3), "cases": len(pairs)}


def predict(factor: dict, ours: float) -> float:
    return factor["scale"] * ours ** factor["exponent"]


def _errors(estimate: list[float], rows: list[tuple[str, float, float]]) -> dict:
    error = [abs(e / theirs - 1) for e, (_, _, theirs) in zip(estimate, rows)]
    return {"median_abs_error": round(statistics.median(error), 3), "p90_abs_error": round(_quantile(error, 0.9), 3),
            "estimated_total_ms": round(sum(estimate), 1), "kafka_total_ms": round(sum(t for _, _, t in rows), 1)}


def bench_factors(repeat: int, write: bool, figures: dict) -> None:
    cases = ladder_cases() + golden_cases()
    print(f"{len(cases)} cases; Kafka's assignors through the oracle (fastest of {KAFKA_REPEAT} calls) ...",
          flush=True)
    kafka = kafka_ms(cases)
    ratios: dict[str, list[tuple[str, float, float]]] = {}
    for c in cases:
        theirs = kafka.get(c["case_id"])
        if theirs is None:
            continue
        ours = ours_ms(c["assignor"], c["input"], repeat)
        if ours <= 0 or theirs <= 0:
            continue
        ratios.setdefault(JOB_NAME[c["assignor"]], []).append((c["case_id"], ours, theirs))
        print(f"  {c['case_id']:<58} ours {ours:9.3f} ms  Kafka {theirs:9.3f} ms  ratio {theirs / ours:6.2f}")
    factors: dict[str, dict] = {}
    errors: dict[str, dict] = {}
    for assignor, rows in sorted(ratios.items()):
        factors[assignor] = fit([(ours, theirs) for _, ours, theirs in rows])
        estimate = [predict(factors[assignor], ours) for _, ours, _ in rows]
        plain = statistics.median(theirs / ours for _, ours, theirs in rows)
        errors[assignor] = {**_errors(estimate, rows),
                            "plain_factor": round(plain, 3),
                            "plain_factor_errors": _errors([ours * plain for _, ours, _ in rows], rows)}
        print(f"{assignor}: Kafka ~ {factors[assignor]['scale']} x ours^{factors[assignor]['exponent']} "
              f"(x{factors[assignor]['low']}-x{factors[assignor]['high']}) over {len(rows)} cases; estimate's error "
              f"median {errors[assignor]['median_abs_error']:.0%}, p90 {errors[assignor]['p90_abs_error']:.0%}, "
              f"total {errors[assignor]['estimated_total_ms']} ms for Kafka's {errors[assignor]['kafka_total_ms']} ms")
    default = {"scale": 1.0, "exponent": 1.0, "low": min(f["low"] for f in factors.values()),
               "high": max(f["high"] for f in factors.values()), "cases": 0}
    figures["factors"] = factors
    figures["estimate_error"] = errors
    figures["cases"] = len(cases)
    figures["ours_repeat"] = repeat
    figures["cases_ms"] = {a: [[n, round(o, 4), round(t, 4)] for n, o, t in rows] for a, rows in ratios.items()}
    if write:
        FACTORS_PATH.write_text(json.dumps({
            "about": "Kafka's assignor time from the job's re-run time (thread CPU, ms) on the same inputs: "
                     "scale * ours ** exponent, fitted per assignor, and the 10th and 90th percentile of Kafka's "
                     "time over that estimate (low, high); written by bench/coordinator_load.py --write-factors "
                     "(its figures: bench/results/coordinator_load.jsonl)",
            "source": "bench/coordinator_load.py", "assignors": factors, "default": default,
        }, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {FACTORS_PATH.relative_to(REPO)}")


def bench_whatif(seeds: int, figures: dict) -> None:
    from interval_scenarios import BROKER_HEARTBEAT_MS, interval_histories
    from offsets_audit.audit import interval_whatif as W
    from offsets_audit.audit.latency import percentile

    def summary(history, interval, recorded):
        replayed = W.replay(history, interval_ms=interval, heartbeat_interval_ms=BROKER_HEARTBEAT_MS,
                            silent=W.silent_stretches(history, recorded))
        lat = replayed.latencies()
        return replayed, (replayed.runs, percentile(lat, 0.5), percentile(lat, 0.95), max(lat))

    rows = []
    for seed in range(1, seeds + 1):
        with tempfile.TemporaryDirectory() as tmp:
            histories = interval_histories(tmp, seed)
        exact = all(W.check_recorded(h, summary(h, i, i)[0]).matches for i, h in histories.items())
        _, forecast = summary(histories[0], 5000, 0)
        _, actual = summary(histories[5000], 5000, 5000)
        diff = [forecast[0] - actual[0]] + [round(f - a, 1) for f, a in zip(forecast[1:], actual[1:])]
        rows.append({"seed": seed, "bumps": histories[0].bumps, "runs_at_0": len(histories[0].computations),
                     "runs_at_5000": actual[0], "predicted_runs_at_5000": forecast[0], "replays_exactly": exact,
                     "diff_runs": diff[0], "diff_p50_ms": diff[1], "diff_p95_ms": diff[2], "diff_max_ms": diff[3]})
        print(f"  seed {seed}: {rows[-1]}")
    figures["whatif"] = {
        "histories": len(rows), "replay_exact_at_recorded_interval": sum(r["replays_exactly"] for r in rows),
        "max_abs_diff_runs": max(abs(r["diff_runs"]) for r in rows),
        "max_abs_diff_p50_ms": max(abs(r["diff_p50_ms"]) for r in rows),
        "max_abs_diff_p95_ms": max(abs(r["diff_p95_ms"]) for r in rows),
        "max_abs_diff_max_ms": max(abs(r["diff_max_ms"]) for r in rows),
        "runs_at_0": [r["runs_at_0"] for r in rows], "runs_at_5000": [r["runs_at_5000"] for r in rows],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("parts", nargs="*", metavar="factors|whatif", help="default: both")
    parser.add_argument("--repeat", type=int, default=3, help="our timed calls per case (median)")
    parser.add_argument("--seeds", type=int, default=5, help="histories of the what-if check")
    parser.add_argument("--write-factors", action="store_true", help=f"write {FACTORS_PATH.name} for the job")
    args = parser.parse_args()
    parts = args.parts or ["factors", "whatif"]
    figures: dict = {}
    if "factors" in parts:
        bench_factors(args.repeat, args.write_factors, figures)
    if "whatif" in parts:
        bench_whatif(args.seeds, figures)
    from results import record  # bench/ is on sys.path

    record("coordinator_load", figures)


if __name__ == "__main__":
    main()
