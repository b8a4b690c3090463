"""``bench/audit.py``'s CPU split: the JVM's CPU, HotSpot's compile time, the collectors' and the Python workers'
CPU between two readings, from ``/proc`` and ``java.lang.management`` (the figures the bench records)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from script_modules import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench/audit.py", "offsets_audit_bench_audit")


def test_a_process_tree_and_its_cpu_come_from_proc(bench):
    busy = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\ntime.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", busy])
    try:
        assert child.pid in bench._descendants(os.getpid())
        assert bench._cpu_seconds(os.getpid()) > 0
        deadline = time.monotonic() + 20
        while bench._cpu_seconds(child.pid) < 0.2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert bench._cpu_seconds(child.pid) >= 0.2
    finally:
        child.kill()
        child.wait()
    assert bench._cpu_seconds(child.pid) == 0.0  # gone: nothing to read
    # an ended child's CPU moves to its parent's reaped count
    assert bench._cpu_seconds(os.getpid(), reaped=True) >= bench._cpu_seconds(os.getpid()) + 0.15


def test_a_worker_started_between_two_readings_counts_from_zero(bench):
    before = {"jvm_cpu": 10.0, "workers": {7: 2.0}, "compiler_threads": {21: 3.0}, "compile": 5.0, "gc": 1.0,
              "classes": 300}
    after = {"jvm_cpu": 14.5, "workers": {7: 3.0, 9: 1.5}, "compiler_threads": {21: 4.0, 23: 0.5}, "compile": 7.5,
             "gc": 1.5, "classes": 310}
    assert bench._cpu_during(before, after) == {"jvm_cpu_s": 4.5, "workers_cpu_s": 2.5, "jit_s": 2.5,
                                                "jit_cpu_s": 1.5, "gc_s": 0.5, "generated_classes": 10}


def test_the_jvm_figures_grow_with_a_spark_job(bench, spark):
    before = bench._jvm_figures(spark)
    assert before["pid"] != os.getpid() and before["jvm_cpu"] > 0
    spark.range(200_000).selectExpr("id % 7 AS k", "id").groupBy("k").count().collect()
    during = bench._cpu_during(before, bench._jvm_figures(spark))
    assert during["jvm_cpu_s"] > 0 and during["jit_s"] >= 0 and during["gc_s"] >= 0
    # HotSpot's compiler threads are found by name: at least C1's and C2's first thread of a tiered JVM
    assert len(before["compiler_threads"]) >= 2 and 0 <= during["jit_cpu_s"] <= during["jvm_cpu_s"]
    assert during["workers_cpu_s"] >= 0 and during["generated_classes"] >= 0


def test_the_stage_bench_notes_each_stage_the_job_announces_and_passes_the_text_on():
    import io

    stage_cpu = load_script("bench/stage_cpu.py", "offsets_audit_bench_stage_cpu")
    real = io.StringIO()
    readings = iter(range(100))
    marks = stage_cpu.StageMarks(real, lambda: next(readings))
    for text in ["[offsets-audit] read+decode ...\n", "a warning\n", "[offsets-audit] replay ...\n",
                 "run demo: [offsets-audit] not a stage\n"]:
        marks.write(text)
    assert [(name, figures) for name, _, figures in marks.marks] == [("read+decode", 0), ("replay", 1)]
    assert marks.marks[0][1] <= marks.marks[1][1]
    assert real.getvalue().count("\n") == 4
