"""A JVM the job starts gets a stderr without PySpark's stateful-streaming worker lines (printed on every
micro-batch of an incremental run), and with everything else it writes."""

from __future__ import annotations

import subprocess
import sys

from offsets_audit.spark_session import WORKER_NOISE, _stderr_without


def test_a_child_started_in_the_block_writes_through_a_stderr_without_the_workers_lines(capfd):
    script = ("import sys, time\n"
              "sys.stderr.write('Starting Streaming TransformWithStateInPandas Python worker.\\n\\n')\n"
              "sys.stderr.write('Streaming TransformWithStateInPandas Python worker Completed execution of UDF: f.\\n\\n')\n"
              "sys.stderr.write('ERROR something the user must see\\n\\n')\n"
              "sys.stderr.flush(); time.sleep(0.5)\n"
              "sys.stderr.write('later, after the block\\n'); sys.stderr.flush()\n")
    with _stderr_without(WORKER_NOISE):
        child = subprocess.Popen([sys.executable, "-c", script])
    print("this process, after the block", file=sys.stderr, flush=True)
    child.wait()
    import time

    time.sleep(0.3)  # the copy thread
    err = capfd.readouterr().err
    assert "TransformWithStateInPandas" not in err
    assert "ERROR something the user must see\n\n" in err
    assert "later, after the block" in err and "this process, after the block" in err
