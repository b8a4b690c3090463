"""Kafka's own server-side assignors timed on the benches' cases, in the same run as ours.

The oracle (``tests/oracle.py``, Kafka's group-coordinator jars resolved by ``make kafka``) runs each case's
``assign`` in a JVM started as a broker starts it (C2 compiler, the default collector), ``repeat`` calls per case
(the first ones warm the JIT), and reports the fastest call's wall time and its calling thread's CPU time. Cases
are sent in chunks of about ``CHUNK_MEMBERS`` members, one JVM per chunk, so a chunk's inputs fit its heap.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterable

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "tests") not in sys.path:
    sys.path.insert(0, str(REPO / "tests"))

#: Kafka's JVM as a broker runs it (the C2 compiler and the default collector), not the oracle's quick-start options
KAFKA_JVM = ("-Xmx3g",)
CHUNK_MEMBERS = 2000


def available() -> str | None:
    """``None`` when Kafka's jars and the oracle can run here, else one line saying why not."""
    try:
        import kafka_jars

        kafka_jars.classpath(kafka_jars.DEFAULT_KAFKA_VERSION)
    except Exception as exc:  # noqa: BLE001 - any failure to resolve the jars means "no Kafka reference here"
        return f"Kafka's jars are not available ({exc.__class__.__name__}: {exc}); run `make kafka`"
    return None


def times(cases: Iterable[tuple[str, str, dict]], repeat: int = 10) -> dict[str, tuple[float, float | None]]:
    """case id -> (Kafka's wall seconds, its calling thread's CPU seconds or ``None``) for each ``(case id,
    assignor, golden-layout input)``; a case on which Kafka's assignor throws has no entry."""
    import kafka_jars
    import oracle

    out: dict[str, tuple[float, float | None]] = {}
    chunk: list[tuple[str, str, dict]] = []

    def flush() -> None:
        if not chunk:
            return
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as handle:
            for case_id, assignor, case_input in chunk:
                handle.write(json.dumps({"case_id": case_id, "assignor": assignor, "input": case_input}) + "\n")
        try:
            command = kafka_jars.java_command(oracle.MAIN, "assign", handle.name, "--repeat", str(repeat),
                                              jvm_options=KAFKA_JVM)
            done = subprocess.run(command, capture_output=True, text=True, check=True)
        finally:
            Path(handle.name).unlink()
        for line in done.stdout.splitlines():
            if line.strip():
                result = json.loads(line)
                if result.get("error") is None:
                    cpu = result.get("java_thread_cpu_nanos")
                    out[result["case_id"]] = (result["java_nanos"] / 1e9, None if not cpu else cpu / 1e9)
        chunk.clear()

    size = 0
    for case in cases:
        chunk.append(case)
        size += len(case[2].get("members") or ())
        if size >= CHUNK_MEMBERS:
            flush()
            size = 0
    flush()
    return out
