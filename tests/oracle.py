"""Kafka's own group coordinator as the test oracle, from Python.

The Java side (``tests/kafka/java/4.0/offsetsaudit/oracle``, with version-specific classes under ``java/4.2`` and
``java/4.4``) is compiled per Kafka version by ``kafka_jars``; these functions run it:

* ``write_histories(scenarios, out)``: each scenario (``oracle_scenarios``, format in docs/oracle.md) played
  through a ``GroupCoordinatorShard`` with a mock clock and fired timers; ``out/__consumer_offsets-P/`` holds each
  history's real log segment, ``out/state/NAME.state.json`` what Kafka's describe / list / offset-fetch answer at
  the end and ``out/state/NAME.epochs.jsonl`` the coordinator's view after every batch it wrote.
* ``replay_folder(folder)``: every partition of a segment folder loaded into a fresh shard the way the coordinator
  loads its partition; what Kafka then answers (and, with ``epochs``, its view after every batch).
* ``run_assignors(inputs)``: Kafka's server-side assignors (uniform, range, share simple, streams sticky) on
  inputs in the golden assignor layout, with each call's wall time.
* ``record_schemas()``: the key and value schemas of every coordinator record type as the version's jar defines them.

Command line (one JVM per call; ``--version`` picks the Kafka version, default the suite's)::

    python tests/oracle.py write SCENARIOS.jsonl OUT [--version V]
    python tests/oracle.py generate SEED COUNT [--version V] [--first N] > SCENARIOS.jsonl
    python tests/oracle.py replay DIR [TOPICS.json] [--epochs] [--broker-configs CONFIGS.json] [--golden STATE.json] [--version V]
    python tests/oracle.py assign INPUTS.jsonl [--chain] [--version V]
    python tests/oracle.py schemas [--version V]
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kafka_jars  # noqa: E402

MAIN = "offsetsaudit.oracle.Main"
JVM_OPTIONS = ("-Xmx1g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")


class OracleFailed(RuntimeError):
    """The oracle's JVM exited with an error (its stderr's tail is the message)."""


def command(*args: str, version: str = kafka_jars.DEFAULT_KAFKA_VERSION) -> list[str]:
    """The ``java`` command line running the oracle with ``args`` on Kafka ``version``'s classpath."""
    return kafka_jars.java_command(MAIN, *args, version=version, jvm_options=JVM_OPTIONS)


def _run(args: Sequence[str], version: str, stdin: str | None = None) -> str:
    done = subprocess.run(command(*args, version=version), input=stdin, capture_output=True, text=True)
    if done.returncode != 0:
        raise OracleFailed(f"oracle {' '.join(args[:1])} on Kafka {version} failed:\n{done.stderr[-4000:]}")
    return done.stdout


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def write_histories(scenarios: Iterable[dict[str, Any]], out: str | Path, *,
                    version: str = kafka_jars.DEFAULT_KAFKA_VERSION) -> list[dict[str, Any]]:
    """Play ``scenarios`` through Kafka ``version``'s coordinator into ``out``; one summary per history."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "scenarios.jsonl"
    path.write_text("".join(json.dumps(s, separators=(",", ":")) + "\n" for s in scenarios), encoding="utf-8")
    return _lines(_run(["run", str(path), str(out)], version))


def load_state(out: str | Path, name: str) -> dict[str, Any]:
    return json.loads((Path(out) / "state" / f"{name}.state.json").read_text(encoding="utf-8"))


def load_epochs(out: str | Path, name: str) -> list[dict[str, Any]]:
    return _lines((Path(out) / "state" / f"{name}.epochs.jsonl").read_text(encoding="utf-8"))


def replay_folder(folder: str | Path, topics: str | Path | None = None, *, epochs: bool = False,
                  broker_configs: dict[str, dict[str, str]] | None = None, golden: str | Path | None = None,
                  version: str = kafka_jars.DEFAULT_KAFKA_VERSION) -> list[dict[str, Any]]:
    """Kafka's state after loading each ``__consumer_offsets-P`` of ``folder`` (one dict per partition).

    ``topics``: a topic-metadata snapshot (the writer's ``topics``) for the loaded coordinator's metadata image;
    ``broker_configs``: the broker configs each partition's coordinator runs with (``{"P": {...}}``, ``"*"`` for all);
    ``golden``: a golden history's stored ``state.json``, whose inputs (topics, clock, groups asked about) the load
    uses; the answer then also holds the remade files' text (``golden_state``, ``golden_epochs``).
    """
    args = (["replay", str(folder)] + ([str(topics)] if topics else []) + (["--epochs"] if epochs else [])
            + (["--golden", str(golden)] if golden else []))
    with tempfile.TemporaryDirectory() as tmp:
        if broker_configs:
            path = Path(tmp) / "broker-configs.json"
            path.write_text(json.dumps(broker_configs), encoding="utf-8")
            args += ["--broker-configs", str(path)]
        return _lines(_run(args, version))


def run_assignors(inputs: Iterable[dict[str, Any]], *, version: str = kafka_jars.DEFAULT_KAFKA_VERSION,
                  repeat: int = 1, chain: bool = False) -> list[dict[str, Any]]:
    """Kafka's assignors on each input (``{"assignor", "input"}``); ``repeat`` > 1 times each call again (JIT warm).

    ``chain``: consecutive steps of one scenario (``case_id`` ``NAME-stepN``) meet the assignment objects the
    previous step's call returned wherever a member's current assignment is that output, as on a broker."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as handle:
        for case in inputs:
            handle.write(json.dumps(case, separators=(",", ":")) + "\n")
        path = handle.name
    try:
        return _lines(_run(["assign", path, "--repeat", str(repeat)] + (["--chain"] if chain else []), version))
    finally:
        Path(path).unlink()


def record_schemas(*, version: str = kafka_jars.DEFAULT_KAFKA_VERSION) -> dict[str, Any]:
    """Every record type's key and value message schemas, as Kafka ``version``'s generated classes hold them."""
    return json.loads(_run(["schemas"], version))


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    version = kafka_jars.DEFAULT_KAFKA_VERSION
    if "--version" in args:
        at = args.index("--version")
        version = args[at + 1]
        del args[at:at + 2]
    if not args:
        print(__doc__.split("Command line")[1], file=sys.stderr)
        return 2
    try:
        if args[0] == "generate":
            import oracle_scenarios

            first = 0
            if "--first" in args:
                at = args.index("--first")
                first = int(args[at + 1])
                del args[at:at + 2]
            for s in oracle_scenarios.scenarios(int(args[1]), int(args[2]), kafka_version=version, first=first):
                print(json.dumps(s, separators=(",", ":")))
        elif args[0] == "write":
            scenarios = _lines(Path(args[1]).read_text(encoding="utf-8"))
            for summary in write_histories(scenarios, args[2], version=version):
                print(json.dumps(summary))
        else:
            sys.stdout.write(_run(args, version))
    except (OracleFailed, kafka_jars.JarsUnavailable) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
