"""The golden data's Kafka-judged parts remade by a Kafka release's own classes through the oracle.

A new Kafka release means running this command and reviewing the diff::

    python tests/golden_regen.py [--version 4.4.0] [--write] [PART ...]   # default: every part below

Parts:

- ``uniform``, ``range``, ``simple``, ``streams_sticky``: ``tests/golden/assignors/<assignor>.jsonl.xz`` holds
  assignor inputs and what Kafka's server-side assignor (``UniformAssignor``, ``RangeAssignor``,
  ``SimpleAssignor``, the streams ``StickyTaskAssignor``) answered. Every input runs through the release's
  assignors (``tests/oracle.py assign``, chained per scenario); only ``expected`` and
  ``java_member_iteration_order`` are replaced, and ``java_nanos`` (a timing) is left as it was so that a rerun on
  the same release changes nothing.
- ``records``: ``tests/golden/records/*.jsonl.xz``. Each record vector's bytes are read by the release's
  ``GroupCoordinatorRecordSerde`` and written back with it (``key_b64``, ``value_b64``, ``value_version``), printed
  by the generated JSON converters (``key_json``, ``value_json``) and by the release's ``kafka-dump-log
  --offsets-decoder`` (``dump_key``, ``dump_payload``); a record type the release no longer reads gets the serde's
  exception as ``current_serde_result`` and the tool's "Unknown record type" line. Consumer protocol vectors are read
  and written back by their generated message classes.
- ``metadata_hash``: ``tests/golden/metadata_hash/*.jsonl.xz``. Each topic case's hash and each group case's topic
  hashes and group hash, as ``Utils.computeTopicHash`` and ``computeGroupHash`` give them over a KRaft metadata
  image of the case's topics and racks (releases from 4.2 on; the hash inputs stay as stored).
- ``segments``: every ``*.expected.jsonl[.xz]`` beside a log segment under ``tests/golden/segments`` and
  ``tests/golden/histories``: each record's batch and record fields as ``FileRecords.batches()`` reads them, and
  ``dump_key``/``dump_payload`` as ``kafka-dump-log --offsets-decoder`` prints them. ``partition`` (chosen, not in
  the file) is kept.
- ``histories``: each golden history's ``NAME.state.json`` and ``NAME.epochs.jsonl[.xz]``, remade from its log
  segment by the release's loader (``tests/oracle.py replay --golden``): every batch replayed as
  ``CoordinatorLoaderImpl`` does, the coordinator's view after each data batch, then ``onLoaded`` with the stored
  topics and the stored clock, and what ListGroups, each describe and OffsetFetch answer for the groups the stored
  state asked about, in its order. The stored ``topics``, ``events`` and clock are inputs and stay.

The random vectors themselves, the segment files and the hash cases' inputs are inputs:
they were written by Kafka's classes once and are re-read here, not rewritten. ``--write`` stores the release's
answers in place (only files with a difference are rewritten). Exit status 1 when an answer differs (and
``--write`` was not given).
"""
from __future__ import annotations

import argparse
import json
import lzma
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kafka_broker  # noqa: E402
import kafka_jars  # noqa: E402
import oracle  # noqa: E402

GOLDEN = Path(__file__).resolve().parent / "golden"
ASSIGNORS = GOLDEN / "assignors"
FILES = ("uniform", "range", "simple", "streams_sticky")
CODEC = ("records", "metadata_hash", "segments")
HISTORY_PARTS = ("histories",)
HISTORIES = GOLDEN / "histories"
#: Histories whose stored files hold what a loaded coordinator cannot know: reported, not a failure, kept as stored.
KNOWN_HISTORIES = {
    "history-streams-group.state.json": "the members' taskOffsets/taskEndOffsets come in heartbeats and are not "
    "written to the log, and the changelog topics' partitions are set when a heartbeat configures the topology; "
    "the release's describe also has fields the writing release lacked (assignorName, topologyDescription*)",
}
RECORD_FILES = ("records/records.jsonl.xz", "records/records_removed_types.jsonl.xz",
                "records/consumer_protocol.jsonl.xz")
HASH_FILES = ("metadata_hash/topic_hash.jsonl.xz", "metadata_hash/group_hash.jsonl.xz")
#: Stored answers the suite's release gives differently, for a known reason: reported, but not a failure.
KNOWN = {
    "simple-20260822-17-step2": "the trunk build that wrote it threw NoSuchElementException; 4.4.0 assigns",
    "simple-20260822-17-step3": "the trunk build that wrote it threw NoSuchElementException; 4.4.0 assigns",
}
#: kafka-dump-log names the offset of a record type it cannot read; the golden line is for offset 0.
_UNKNOWN_AT = re.compile(r"^(Unknown record type -?\d+ at offset )\d+(, skipping\.)$")


def _read(name: str) -> list[dict]:
    with lzma.open(ASSIGNORS / f"{name}.jsonl.xz", "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def regenerate(name: str, version: str, scenarios: Sequence[str] | None = None) -> tuple[list[dict], list[str]]:
    """The stored cases of ``name`` (or of its ``scenarios`` only) with Kafka ``version``'s answers, and the case
    ids whose answer changed. A scenario's steps run in a chain: each step's members whose current assignment is
    the previous step's answer meet it as the coordinator would have kept it (tests/oracle.py ``chain``)."""
    cases = [c for c in _read(name) if scenarios is None or c["case_id"].rsplit("-step", 1)[0] in scenarios]
    answers = oracle.run_assignors(
        ({"assignor": c["assignor"], "case_id": c["case_id"], "input": c["input"]} for c in cases),
        version=version, chain=True)
    changed, out = [], []
    for case, answer in zip(cases, answers, strict=True):
        expected = {"error": answer.get("error"), "members": answer.get("members")}
        if expected != case["expected"]:
            changed.append(case["case_id"])
        out.append({**case, "expected": expected,
                    "java_member_iteration_order": answer.get("java_member_iteration_order")})
    return out, changed


def oracle_version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3])


def _lines(path: Path) -> list[dict]:
    with (lzma.open(path, "rt", encoding="utf-8") if path.suffix == ".xz" else path.open(encoding="utf-8")) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _write_lines(path: Path, lines: Sequence[dict]) -> None:
    text = "".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in lines)
    if path.suffix == ".xz":
        with lzma.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")


def _oracle_lines(version: str, *args: str) -> list[dict]:
    done = subprocess.run(kafka_jars.java_command("offsetsaudit.oracle.Main", "golden", *args, version=version),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the oracle's golden {args[0]} failed on Kafka {version}:\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.split("\n") if line.strip()]


def _dump_entry(line: str) -> tuple[str, str | None] | None:
    """A record line of ``kafka-dump-log --print-data-log`` as (key, payload): the key is a JSON document the
    payload follows, or a sentence with no payload (a record type the tool cannot read)."""
    at = line.find(" key: ")
    if at < 0:
        return None
    rest = line[at + len(" key: "):]
    try:
        _, end = json.JSONDecoder().raw_decode(rest)
    except ValueError:
        return rest, None
    payload = rest[end:]
    if not payload.startswith(" payload: "):
        return rest, None
    return rest[:end], payload[len(" payload: "):]


def kafka_dump_log(version: str, segments: Sequence[Path]) -> list[dict[int, tuple[str, str | None]]]:
    """What the release's ``kafka-dump-log --offsets-decoder --print-data-log`` prints for each data record of
    each segment, by offset. Each segment is dumped from a copy named by its base offset, as the tool requires."""
    with tempfile.TemporaryDirectory(prefix="golden-dump-") as tmp:
        copies = []
        for i, segment in enumerate(segments):
            copy = Path(tmp) / str(i) / "00000000000000000000.log"
            copy.parent.mkdir()
            shutil.copyfile(segment, copy)
            copies.append(copy)
        run = kafka_broker.run_tools([kafka_broker.dump_log_invocation(version, copies)], version, Path(tmp) / "tools")[0]
        if run.returncode != 0:
            raise RuntimeError(f"kafka-dump-log {version} failed:\n{run.stderr[-3000:]}")
        out: list[dict[int, tuple[str, str | None]]] = [{} for _ in segments]
        current: dict[int, tuple[str, str | None]] | None = None
        for line in run.stdout.split("\n"):
            if line.startswith("Dumping "):
                current = out[int(Path(line[len("Dumping "):].strip()).parent.name)]
            elif line.startswith("| offset: ") and current is not None:
                entry = _dump_entry(line)
                if entry is not None:
                    current[int(line.split()[2])] = entry
        return out


def _changed(name: str, stored: dict, remade: dict) -> list[str]:
    return [f"{name}: {field}" for field in remade if stored.get(field, _MISSING) != remade[field]]


_MISSING = object()


def expected_files() -> list[Path]:
    """Every golden ``*.expected.jsonl[.xz]`` that stands beside its log segment."""
    found = [*(GOLDEN / "segments").glob("*.expected.jsonl*"), *(GOLDEN / "histories").rglob("*.expected.jsonl*")]
    return sorted(found)


def _segment_of(expected: Path) -> Path:
    return expected.with_name(expected.name.split(".expected.jsonl")[0] + ".log")


def regenerate_codec(version: str, records: bool = True, files: Sequence[Path] | None = (), hashes: bool = False
                     ) -> tuple[dict[str | Path, list[dict]], list[str]]:
    """The record and consumer protocol vectors (``records``), the metadata hash cases (``hashes``) and the
    expected files of the golden segments (``files``; None: all) with the release's answers, by file, and what
    differs. One oracle JVM and one kafka-dump-log JVM do them all."""
    files = list(files) if files is not None else expected_files()
    segments = [_segment_of(path) for path in files]
    stored = {name: _lines(GOLDEN / name) for name in RECORD_FILES} if records else {}
    with tempfile.TemporaryDirectory(prefix="golden-records-") as tmp:
        args: list[str] = []
        dumped_segments = list(segments)
        if records:
            vectors = Path(tmp) / "vectors.jsonl"
            vectors.write_text("".join(json.dumps(line) + "\n" for name in RECORD_FILES for line in stored[name]))
            segment = Path(tmp) / "records" / "00000000000000000000.log"
            args += ["records", str(vectors), str(segment)]
            dumped_segments.append(segment)
        hash_cases = {name: _lines(GOLDEN / name) for name in HASH_FILES} if hashes else {}
        if hashes:
            for name in HASH_FILES:
                (Path(tmp) / Path(name).name).write_text("".join(json.dumps(line) + "\n" for line in hash_cases[name]))
            args += ["hash", *(str(Path(tmp) / Path(name).name) for name in HASH_FILES)]
        if segments:
            args += ["segment", *map(str, segments)]
        answers = _oracle_lines(version, *args)
        dumped = kafka_dump_log(version, dumped_segments) if dumped_segments else []
    out: dict[str | Path, list[dict]] = {}
    changed: list[str] = []
    if records:
        vector_answers = iter([a for a in answers if "file" not in a and "topic_hash" not in a
                               and "group_hash" not in a])
        _remake_records(stored, vector_answers, dumped[-1], out, changed)
    if hashes:
        _remake_hashes(hash_cases, [a for a in answers if "topic_hash" in a or "group_hash" in a], out, changed)
    by_file: dict[str, list[dict]] = {}
    for line in answers:
        if "file" in line:
            by_file.setdefault(line.pop("file"), []).append(line)
    for path, segment, dump in zip(files, segments, dumped):
        _remake_segment(path, by_file.get(segment.name, []), dump, out, changed)
    return out, changed


def _remake_records(stored: dict[str, list[dict]], answers: Iterator[dict], dumped: dict[int, tuple[str, str | None]],
                    out: dict[str | Path, list[dict]], changed: list[str]) -> None:
    offset = 0
    for name in RECORD_FILES:
        out[name] = []
        for index, line in enumerate(stored[name]):
            answer = next(answers)
            remade: dict[str, Any] = {}
            if "kind" in line:
                remade = {"value_json": answer["value_json"], "value_b64": answer["value_b64"]}
            else:
                if "error" in answer:
                    remade["current_serde_result"] = answer["error"]
                else:
                    remade.update({k: answer[k] for k in ("key_b64", "value_b64", "value_version", "key_json",
                                                          "value_json")})
                    if "current_serde_result" in line:
                        remade["current_serde_result"] = None
                key, payload = dumped.get(offset, (None, None))
                if key is not None:
                    key = _UNKNOWN_AT.sub(r"\g<1>0\g<2>", key)
                remade.update({"dump_key": key, "dump_payload": payload})
                offset += 1
            changed += _changed(f"{name}[{index}] {line.get('record_name', '')}", line, remade)
            out[name].append({**line, **remade})


def _remake_hashes(stored: dict[str, list[dict]], answers: list[dict], out: dict[str | Path, list[dict]],
                   changed: list[str]) -> None:
    remade_lines = iter(answers)
    for name in HASH_FILES:
        out[name] = []
        for line in stored[name]:
            remade = dict(next(remade_lines))
            for field in ("topic_hash", "group_hash"):
                if f"{field}_hex" in line:
                    remade[f"{field}_hex"] = f"{remade[field] & 0xFFFFFFFFFFFFFFFF:016x}"
            changed += _changed(f"{name}[{line['case_id']}]", line, remade)
            out[name].append({**line, **remade})


def _remake_segment(path: Path, remade_lines: list[dict], dump: dict[int, tuple[str, str | None]],
                    out: dict[str | Path, list[dict]], changed: list[str]) -> None:
    stored = _lines(path)
    if len(remade_lines) != len(stored):
        changed.append(f"{path.name}: {len(remade_lines)} records read, {len(stored)} stored")
        out[path] = stored
        return
    lines = []
    for line, remade in zip(stored, remade_lines):
        if not remade["is_control"] and "dump_key" in line:
            remade["dump_key"], remade["dump_payload"] = dump.get(remade["offset"], (None, None))
        changed += _changed(f"{path.name} offset {line['offset']}", line, remade)
        lines.append({**line, **remade})
    out[path] = lines


def _text(path: Path) -> str:
    if path.suffix == ".xz":
        with lzma.open(path, "rt", encoding="utf-8") as handle:
            return handle.read()
    return path.read_text(encoding="utf-8")


def history_files(names: Sequence[str] | None = None) -> list[Path]:
    """The golden histories' stored states (``NAME.state.json``), or those of ``names`` only."""
    found = sorted(HISTORIES.rglob("*.state.json"))
    return [p for p in found if names is None or p.name[:-len(".state.json")] in names]


def regenerate_histories(version: str, states: Sequence[Path]) -> tuple[dict[Path, str], list[str]]:
    """Each history's ``state.json`` and ``epochs.jsonl`` as the release's loader remakes them from its segment
    (path -> text, the stored compression kept), and the files whose text differs from the stored one."""
    remade: dict[Path, str] = {}
    changed: list[str] = []
    for state in states:
        name = state.name[:-len(".state.json")]
        stored = json.loads(state.read_text(encoding="utf-8"))
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / f"__consumer_offsets-{stored.get('partition', 0)}"
            folder.mkdir()
            shutil.copyfile(state.parent / f"{name}-00000000000000000000.log", folder / "00000000000000000000.log")
            answer = oracle.replay_folder(tmp, golden=state, version=version)[0]
        remade[state] = answer["golden_state"]
        epochs = [p for p in (state.parent / f"{name}.epochs.jsonl", state.parent / f"{name}.epochs.jsonl.xz")
                  if p.exists()]
        if epochs:
            remade[epochs[0]] = answer["golden_epochs"]
        for path in [state, *epochs]:
            if remade[path] != _text(path):
                changed.append(str(path.relative_to(GOLDEN)))
    return remade, changed


def _store_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".xz":
        with lzma.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="*", help=f"any of {', '.join(FILES + CODEC + HISTORY_PARTS)} (default: all)")
    parser.add_argument("--version", default=kafka_jars.DEFAULT_KAFKA_VERSION)
    parser.add_argument("--write", action="store_true", help="store the release's answers in tests/golden")
    parser.add_argument("--out", type=Path, help="write every remade file under this folder (the layout of "
                        "tests/golden) instead of comparing: one release's golden data beside the stored one")
    args = parser.parse_args(argv)
    unknown = [name for name in args.parts if name not in FILES + CODEC + HISTORY_PARTS]
    if unknown:
        parser.error(f"no golden part {unknown[0]!r}: choose from {', '.join(FILES + CODEC + HISTORY_PARTS)}")
    parts = args.parts or FILES + CODEC + HISTORY_PARTS
    differ = False
    for name in [p for p in parts if p in FILES]:
        if name == "streams_sticky" and oracle_version_key(args.version) < (4, 2):
            print(f"{name}: Kafka {args.version} has no streams sticky assignor the oracle can run; skipped")
            continue
        cases, changed = regenerate(name, args.version)
        known = [case for case in changed if case in KNOWN and args.version == kafka_jars.DEFAULT_KAFKA_VERSION]
        changed = [case for case in changed if case not in known]
        print(f"{name}: {len(cases)} cases on Kafka {args.version}, {len(changed)} answer(s) differ"
              + (": " + ", ".join(changed[:20]) if changed else "")
              + "".join(f"; known: {case} ({KNOWN[case]})" for case in known))
        if known and args.out is None:
            stored = {case["case_id"]: case for case in _read(name)}
            cases = [stored[case["case_id"]] if case["case_id"] in known else case for case in cases]
        if args.out is not None or (args.write and changed):
            target = (args.out or GOLDEN) / "assignors" / f"{name}.jsonl.xz"
            target.parent.mkdir(parents=True, exist_ok=True)
            with lzma.open(target, "wt", encoding="utf-8") as handle:
                for case in cases:
                    handle.write(json.dumps(case, separators=(",", ":")) + "\n")
        differ |= bool(changed)
    hashes = "metadata_hash" in parts and oracle_version_key(args.version) >= (4, 2)
    if "metadata_hash" in parts and not hashes:
        print(f"metadata_hash: Kafka {args.version} skipped: the oracle hashes with the metadata image interface "
              "of Kafka 4.2 and later")
    if "records" in parts or "segments" in parts or hashes:
        files, changed = regenerate_codec(args.version, "records" in parts, None if "segments" in parts else (),
                                          hashes)
        print(f"{', '.join(p for p in CODEC if p in parts)}: {sum(map(len, files.values()))} lines in {len(files)} files on Kafka "
              f"{args.version}, {len(changed)} field(s) differ" + (": " + ", ".join(changed[:20]) if changed else ""))
        touched = {c.split("[")[0].split(" ")[0].rstrip(":") for c in changed}
        for key, lines in files.items():
            path = key if isinstance(key, Path) else GOLDEN / key
            if args.out is not None:
                target = args.out / path.relative_to(GOLDEN)
                target.parent.mkdir(parents=True, exist_ok=True)
                _write_lines(target, lines)
            elif args.write and (str(key) in touched or path.name in touched):
                _write_lines(path, lines)
        differ |= bool(changed)
    if "histories" in parts:
        remade, changed = regenerate_histories(args.version, history_files())
        known = [c for c in changed if Path(c).name in KNOWN_HISTORIES]
        changed = [c for c in changed if c not in known]
        print(f"histories: {len(remade)} state and epochs files on Kafka {args.version}, {len(changed)} differ"
              + (": " + ", ".join(changed[:20]) if changed else "")
              + "".join(f"; known: {c} ({KNOWN_HISTORIES[Path(c).name]})" for c in known))
        for path, text in remade.items():
            relative = str(path.relative_to(GOLDEN))
            if args.out is not None:
                _store_text(args.out / relative, text)
            elif args.write and relative in changed:
                _store_text(path, text)
        differ |= bool(changed)
    return 1 if differ and not (args.write or args.out) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
