"""Real clients against a real broker, and Kafka's own tools as the judge of what the job reads.

``run_scenarios`` starts the scenario driver (``tests/kafka/java/common/offsetsaudit/scenarios``: Kafka's Java
clients of the broker's version) and returns once every scenario holds its groups stable with members alive.
``capture`` then takes, from the quiet broker, what Kafka says of its groups (``kafka-consumer-groups``,
``kafka-share-groups``, ``kafka-streams-groups``, ``kafka-topics``) together with the end offsets of
``__consumer_offsets`` at that moment, and retries until no record was appended while the tools ran, so the
log up to those offsets is exactly the state the tools described.

The judges compare, as plain data:

* :func:`parse_dump_log`: ``kafka-dump-log --offsets-decoder`` text, per segment file and offset;
* :func:`kafka_view`: the tools' tables, parsed into offsets, group states and members;
* :func:`replay_view`: the same shape from the job's replay (``replay_records``), topic ids named through
  ``kafka-topics``; :func:`differences` lists what differs, one line per value.
"""

from __future__ import annotations

import json
import queue
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pytest

from kafka_broker import (
    DEFAULT_KAFKA_VERSION, OFFSETS_TOPIC, KafkaBroker, dump_log_invocation, require_jars, run_tools, version_key,
)

#: Every scenario of the driver, and the Kafka versions whose clients and broker can run it.
SCENARIOS = ("classic_eager", "classic_cooperative", "classic_static", "consumer_uniform", "consumer_range",
             "consumer_mixed", "consumer_static", "consumer_regex", "transactions", "migration", "admin_groups", "share",
             "streams")


def supported_scenarios(broker: KafkaBroker) -> list[str]:
    """The scenarios ``broker``'s version runs: KIP-848 from 3.9, its broker-side regexes and share groups from
    4.0 (early access there), streams groups from 4.2."""
    s = broker.supports
    unsupported = set()
    if not s.share:
        unsupported.update(("consumer_regex", "share"))
    if not s.streams:
        unsupported.add("streams")
    return [name for name in SCENARIOS if name not in unsupported]


# -- the driver ------------------------------------------------------------------------------------------------


class ScenarioRun:
    """The scenario driver's JVM: ``READY`` once every scenario holds its groups, ``stop()`` ends it."""

    def __init__(self, broker: KafkaBroker, folder: Path, prefix: str, names: Sequence[str]) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        command = broker.java_command("offsetsaudit.scenarios.Scenarios", "run", broker.bootstrap, str(folder), prefix,
                                      *names, jvm_options=("-Xmx512m", "-XX:+UseSerialGC"))
        self.stderr = open(folder / "driver.err", "w")
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                        text=True)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.report: dict[str, dict] = {}

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.strip())
        self._lines.put(None)

    def _expect(self, word: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = ""
            if line == word:
                return
            if line is None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"scenario driver did not print {word}: "
                                     f"{(self.folder / 'driver.err').read_text()[-4000:]}")

    def wait_ready(self, timeout_s: float = 300.0) -> dict[str, dict]:
        self._expect("READY", timeout_s)
        self.report = json.loads((self.folder / "scenarios.json").read_text())
        return self.report

    def stop(self, timeout_s: float = 120.0) -> None:
        """Ends the hold: held members and Streams instances close (leave their groups), the JVM exits."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.write("stop\n")
            self.process.stdin.flush()
            self._expect("DONE", timeout_s)
            self.process.wait(timeout=30)
        self.stderr.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def groups(self, kind: str | None = None) -> list[str]:
        """The groups the scenarios left for the judges (``kind``: consumer, share or streams)."""
        return [g for s in self.report.values() for g, k in s["groups"].items() if kind is None or k == kind]


def run_to_the_end(broker: KafkaBroker, folder: Path, prefix: str, names: Sequence[str]) -> dict[str, dict]:
    """The scenarios held to READY, then stopped: their members leave and the topic goes quiet. Their report."""
    driver = ScenarioRun(broker, folder, prefix, names)
    try:
        report = driver.wait_ready()
        driver.stop()
    finally:
        driver.kill()
    return report


def admin_commands(broker: KafkaBroker, prefix: str) -> list[list[str]]:
    """What ``admin_groups`` leaves for ``kafka-consumer-groups`` to do: delete one topic's offsets of a group,
    delete a group, reset an empty group's offsets of one topic to the earliest."""
    base = f"{prefix}-admin_groups"
    return [
        broker.groups_invocation("consumer", "--delete-offsets", "--group", f"{base}-delete-offsets",
                                 "--topic", f"{base}-first"),
        broker.groups_invocation("consumer", "--delete", "--group", f"{base}-deleted"),
        broker.groups_invocation("consumer", "--reset-offsets", "--group", f"{base}-reset", "--topic",
                                 f"{base}-second", "--to-earliest", "--execute"),
    ]


# -- one run of the scenarios, and what it leaves for the judges ----------------------------------------------


@dataclass
class RealRun:
    """What one run of the scenarios on a broker left for the judges: the scenarios' report, the admin tools'
    outcomes, Kafka's description of the groups, the live topic's records, and a copy of ``__consumer_offsets``
    taken right after the description (``log_dir``) with what ``kafka-dump-log`` printed for it."""

    broker: KafkaBroker
    folder: Path
    log_dir: Path
    scenarios: dict
    expected: list[str]
    admin: list
    capture: Capture
    live: list[dict]
    dump_log: str
    names: dict[str, str] = field(default_factory=dict)
    #: The broker's kill -9 and restart in the middle of the scenarios, when the run had one: the broker's
    #: starts before and after, and the records of ``__consumer_offsets`` before the run and at the kill.
    restart: dict | None = None


#: Records the scenarios append to ``__consumer_offsets`` before a run with a fault kills the broker: a few
#: rebalances and commits into the run, with most of the scenarios still under way.
KILL_AFTER_RECORDS = 40


def _offsets_records(broker: KafkaBroker) -> int:
    try:
        return sum(broker.end_offsets().values())
    except Exception:  # noqa: BLE001 - the topic is created by the first group's coordinator lookup
        return 0


def kill_when_busy(broker: KafkaBroker, records: int, timeout_s: float = 120.0) -> int:
    """kill -9 the broker once ``__consumer_offsets`` holds ``records`` records in all (the scenarios are
    mid-way); returns how many it held."""
    deadline = time.monotonic() + timeout_s
    held = 0
    while time.monotonic() < deadline:
        held = _offsets_records(broker)
        if held >= records:
            break
        time.sleep(0.2)
    broker.kill()
    return held


def copy_segments(log_dir: Path, dest: Path) -> Path:
    """The ``.log`` segments of every ``__consumer_offsets-N`` folder under ``log_dir`` copied to ``dest`` (what
    the readers and ``kafka-dump-log`` read; the indexes are the broker's own business)."""
    for segment in log_dir.glob(f"{OFFSETS_TOPIC}-*/*.log"):
        target = dest / segment.parent.name / segment.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(segment, target)
    return dest


def run_scenarios(broker: KafkaBroker, folder: Path, prefix: str, *, kill_after: int | None = None,
                  parquet_dump: Path | None = None) -> RealRun:
    """Every scenario ``broker``'s version supports, at once, on ``broker``; with ``kill_after``, the broker is
    killed (-9) once the scenarios have appended that many records and started again while they carry on.
    Once they hold their groups: ``kafka-consumer-groups`` deletes and resets the admin scenario's groups, the
    tools describe every group, ``__consumer_offsets`` is copied, read live (and, given ``parquet_dump``,
    dumped there with ``offsets-audit dump``), and ``kafka-dump-log`` prints the copy. The scenarios' clients
    are killed at the end (the broker keeps running: a shared broker serves other tests)."""
    expected = supported_scenarios(broker)
    restart = None
    driver = ScenarioRun(broker, folder / "scenarios", prefix, expected)
    try:
        if kill_after is not None:
            before, starts = _offsets_records(broker), broker.starts
            at_kill = kill_when_busy(broker, before + kill_after)
            time.sleep(1.0)
            broker.start()
            restart = {"records_before": before, "records_at_kill": at_kill, "starts_before": starts,
                       "starts_after": broker.starts}
        scenarios = driver.wait_ready()
        admin = broker.run_tools(admin_commands(broker, prefix))
        described = capture(broker, driver.groups("share"), driver.groups("streams"))
        log_dir = copy_segments(broker.log_dir, folder / "log")
        described.save(folder / "capture")
        live = live_records(broker.bootstrap, described.end_offsets)
        if parquet_dump is not None:
            from offsets_audit.cli import main

            ending = json.dumps({OFFSETS_TOPIC: {str(p): o for p, o in described.end_offsets.items()}})
            assert main(["dump", "--bootstrap-server", broker.bootstrap, "--ending-offsets", ending,
                         "--output", str(parquet_dump), "--progress-interval", "600"]) == 0
    finally:
        driver.kill()
    segments = sorted(log_dir.glob(f"{OFFSETS_TOPIC}-*/*.log"))
    dump_log = run_tools([dump_log_invocation(broker.version, segments)], broker.version, folder)[0].check().stdout
    (folder / "capture" / "dump-log.txt").write_text(dump_log)
    return RealRun(broker, folder, log_dir, scenarios, expected, admin, described, live, dump_log,
                   topic_names(described.outputs["topics"]), restart)


@pytest.fixture(scope="session")
def real_kafka_run(kafka_broker, tmp_path_factory) -> RealRun:
    """The default suite's one run of every scenario, on the session's broker, with the broker killed (-9)
    and restarted in the middle of it: the runs that judge decode, replay and audit against Kafka's tools
    (``test_real_kafka``) and the faults' (``test_real_kafka_faults``) share it."""
    require_jars(DEFAULT_KAFKA_VERSION)
    return run_scenarios(kafka_broker, tmp_path_factory.mktemp("real-kafka-run"), "rk",
                         kill_after=KILL_AFTER_RECORDS)


def audit_config(folder: Path, version: str) -> Path:
    """A job config for a broker of ``version`` (what a user states of their cluster), no HTML report."""
    major, minor = version_key(version)[:2]
    path = folder / f"audit-{version}.yaml"
    path.write_text(f"broker:\n  kafka_version: \"{major}.{minor}\"\noutput:\n  html_report: false\n")
    return path


# -- capture ---------------------------------------------------------------------------------------------------


@dataclass
class Capture:
    """What Kafka's tools printed about the broker's groups, and the end offsets of ``__consumer_offsets`` they
    describe (the log below them is that state)."""

    version: str
    end_offsets: dict[int, int]
    outputs: dict[str, str] = field(default_factory=dict)
    attempts: int = 1

    def save(self, folder: Path) -> None:
        """Each tool's output as ``<name>.txt`` and the end offsets as ``end_offsets.json`` (to read after a
        failure, or to compare versions)."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in self.outputs.items():
            (folder / f"{name}.txt").write_text(text)
        (folder / "end_offsets.json").write_text(json.dumps(self.end_offsets))


def describe_invocations(broker: KafkaBroker, share_groups: Sequence[str],
                         streams_groups: Sequence[str]) -> dict[str, list[str]]:
    calls = {
        "offsets": broker.groups_invocation("consumer", "--describe", "--all-groups", "--offsets", "--verbose"),
        "members": broker.groups_invocation("consumer", "--describe", "--all-groups", "--members", "--verbose"),
        "state": broker.groups_invocation("consumer", "--describe", "--all-groups", "--state", "--verbose"),
        "list": broker.groups_invocation("consumer", "--list", "--state"),
        "topics": ["org.apache.kafka.tools.TopicCommand", "--bootstrap-server", broker.bootstrap, "--describe"],
    }
    for kind, groups in (("share", share_groups), ("streams", streams_groups)):
        if not groups:
            continue
        named = [arg for group in groups for arg in ("--group", group)]
        # kafka-share-groups has --verbose from 4.1 on (4.0's early-access tool prints without it)
        verbose = ["--verbose"] if kind == "streams" or version_key(broker.version) >= (4, 1) else []
        for what in ("members", "state", "offsets"):
            calls[f"{kind}_{what}"] = broker.groups_invocation(kind, "--describe", *named, f"--{what}", *verbose)
    return calls


def capture(broker: KafkaBroker, share_groups: Sequence[str] = (), streams_groups: Sequence[str] = (),
            *, attempts: int = 6, settle_s: float = 1.0, patience_s: float = 300.0) -> Capture:
    """Kafka's description of every group, taken when no record was appended to ``__consumer_offsets`` from
    before the tools ran until after (a periodic write, e.g. a regex refresh, makes it try again).

    It tries at least ``attempts`` times and goes on until ``patience_s`` has passed: on a loaded machine one
    run of the tools can outlast a refresh interval, so a group whose killed member has not yet timed out keeps
    writing through several attempts; once its session expires the log stays still."""
    calls = describe_invocations(broker, share_groups, streams_groups)
    deadline = time.monotonic() + patience_s
    attempt = 0
    while True:
        attempt += 1
        before = broker.end_offsets()
        time.sleep(settle_s)
        runs = broker.run_tools(list(calls.values()))
        after = broker.end_offsets()
        if before == after:
            for run in runs:
                run.check()
            return Capture(broker.version, before, {name: run.stdout for name, run in zip(calls, runs)}, attempt)
        if attempt >= attempts and time.monotonic() >= deadline:
            break
        time.sleep(settle_s * min(attempt, 10))
    raise AssertionError(f"__consumer_offsets kept growing while the tools ran, {attempt} attempts "
                         f"({before} -> {after})")


# -- kafka-dump-log ------------------------------------------------------------------------------------------------

_DUMPING = re.compile(r"^Dumping (?P<file>\S+)$")
_RECORD = re.compile(r"^\| offset: (?P<offset>\d+) .*? (?:key: (?P<key>.*) payload: (?P<payload>.*)"
                     r"|endTxnMarker: (?P<marker>\w+) coordinatorEpoch: (?P<epoch>-?\d+))$")
_RECORD_START = re.compile(r"^\| offset: (?P<offset>\d+) ")


def aborted_offsets(records: list[dict]) -> set[tuple[int, int]]:
    """(partition, offset) of the transactional records whose transaction was aborted
    (a control record ABORT of the same producer on the same partition closes it)."""
    open_: dict[tuple[int, int], list[tuple[int, int]]] = {}
    aborted = set()
    for r in records:
        producer = (r["partition"], r["producer_id"])
        if r["is_control"]:
            if r["control_type"] == "ABORT":
                aborted.update(open_.get(producer, []))
            open_.pop(producer, None)
        elif r["is_transactional"]:
            open_.setdefault(producer, []).append((r["partition"], r["offset"]))
    return aborted


def parse_dump_log(text: str) -> dict[str, dict[int, tuple]]:
    """``kafka-dump-log --offsets-decoder --print-data-log`` text as ``{segment file name: {offset: entry}}``:
    ``("record", key, payload)`` or ``("marker", COMMIT|ABORT, coordinator epoch)``; a record line the
    decoder could not print (``("unparsed", line)``) is kept too, so nothing is dropped silently."""
    files: dict[str, dict[int, tuple]] = {}
    current: dict[int, tuple] | None = None
    for line in text.splitlines():
        dumping = _DUMPING.match(line)
        if dumping:
            current = files.setdefault(Path(dumping["file"]).parent.name + "/" + Path(dumping["file"]).name, {})
            continue
        start = _RECORD_START.match(line)
        if not start or current is None:
            continue
        offset = int(start["offset"])
        match = _RECORD.match(line)
        if match is None:
            current[offset] = ("unparsed", line)
        elif match["marker"]:
            current[offset] = ("marker", match["marker"], int(match["epoch"]))
        else:
            current[offset] = ("record", match["key"], match["payload"])
    return files


def our_dump_log(segments: Iterable[Path]) -> tuple[dict[str, dict[int, tuple]], list[dict]]:
    """What our reader and codec make of the same segment files, in ``parse_dump_log``'s shape, and the
    quarantine entries the reader wrote (none for a broker's own log)."""
    from offsets_audit.codec.records import decode_record, kafka_dump_log
    from offsets_audit.sources.segments import read_segment

    files: dict[str, dict[int, tuple]] = {}
    quarantine: list[dict] = []
    for segment in segments:
        entries = files.setdefault(segment.parent.name + "/" + segment.name, {})
        for record in read_segment(segment, quarantine=quarantine):
            if record["is_control"]:
                entries[record["offset"]] = ("marker", record["control_type"], record["coordinator_epoch"])
            else:
                key, payload = kafka_dump_log(decode_record(record["key"], record["value"]))
                entries[record["offset"]] = ("record", key, payload)
    return files, quarantine


# -- the tools' tables ------------------------------------------------------------------------------------------


def parse_tables(text: str) -> list[dict[str, str]]:
    """Rows of the fixed-width tables the group tools print (blocks of a header and rows; a column starts where
    its header word starts, the last runs to the end of the line)."""
    rows: list[dict[str, str]] = []
    header: list[tuple[str, int]] | None = None
    for line in text.splitlines():
        if not line.strip():
            header = None
            continue
        if line.startswith("GROUP ") or line.startswith("GROUP\t"):
            spaced = line.replace("COORDINATOR (ID)", "COORDINATOR-(ID)")
            header = [(m.group(), m.start()) for m in re.finditer(r"\S+", spaced)]
            continue
        if header is None:
            continue
        rows.append(_split_row(line, header))
    return rows


def _split_row(line: str, header: list[tuple[str, int]]) -> dict[str, str]:
    """One row cut at its header's column starts; a value wider than its column (the tools pad with ``%-Ns``,
    so an overlong value pushes the rest of its line right) moves the later cuts with it."""
    row: dict[str, str] = {}
    shift = 0
    for i, (name, start) in enumerate(header):
        begin = start + shift
        if i + 1 == len(header):
            row[name] = line[begin:].strip()
            break
        end = header[i + 1][1] + shift
        while begin < end - 1 < len(line) - 1 and line[end - 1] != " ":
            end += 1
        shift = end - header[i + 1][1]
        row[name] = line[begin:end].strip()
    return row


def parse_assignment(text: str) -> dict[str, list[int]]:
    """``topic:0,1;other:3`` (4.0's share tool: ``topic:0,topic:1``; ``-`` or empty: nothing) as
    ``{topic: [partitions]}``."""
    out: dict[str, set[int]] = {}
    if text in ("", "-"):
        return {}
    if text.startswith("("):
        raise ValueError(f"assignment {text!r} names no topics: read it with parse_unnamed_assignment")
    for topic, partitions in re.findall(r"([A-Za-z0-9._-]+):([\d,]+)", text):
        out.setdefault(topic, set()).update(int(p) for p in partitions.split(",") if p)
    return {topic: sorted(parts) for topic, parts in out.items()}


def parse_unnamed_assignment(text: str) -> list[list[int]]:
    """Kafka 3.9's ``--members --verbose`` ASSIGNMENT, ``(1), (3,4)``: each topic's partitions with the topic
    name left out, as a sorted list of sorted partition lists."""
    return sorted(sorted(int(p) for p in group.split(",") if p) for group in re.findall(r"\(([\d,]*)\)", text))


def unnamed(assignment: Mapping[str, list[int]]) -> list[list[int]]:
    """An assignment as ``parse_unnamed_assignment`` reads one: the partition lists without topic names."""
    return sorted(sorted(parts) for parts in assignment.values() if parts)


_TASKS = re.compile(r"(?P<target>TARGET-)?(?P<kind>ACTIVE|STANDBY|WARMUP)(?:-TASKS)?:\s*(?P<tasks>[^;]*);")
_TASK = re.compile(r"(?P<subtopology>[^\s:,\[\]]+):\s*\[(?P<partitions>[\d,\s]*)\]")


def parse_streams_tasks(text: str) -> dict[str, dict[str, dict[str, list[int]]]]:
    """``ACTIVE: 0:[2,3]; TARGET-ACTIVE: 0:[2,3];`` as ``{"current"|"target": {active|standby|warmup:
    {subtopology: [partitions]}}}`` (kinds not printed are empty)."""
    out: dict[str, dict[str, dict[str, list[int]]]] = {
        side: {kind: {} for kind in ("active", "standby", "warmup")} for side in ("current", "target")}
    for match in _TASKS.finditer(text):
        side = "target" if match["target"] else "current"
        for task in _TASK.finditer(match["tasks"]):
            partitions = sorted(int(p) for p in task["partitions"].replace(" ", "").split(",") if p)
            if partitions:
                out[side][match["kind"].lower()][task["subtopology"]] = partitions
    return out


def topic_names(topics_text: str) -> dict[str, str]:
    """Topic id -> name from ``kafka-topics --describe``."""
    return {m["id"]: m["name"] for m in re.finditer(r"Topic: (?P<name>\S+)\s+TopicId: (?P<id>\S+)", topics_text)}


def _int(text: str) -> int | None:
    return None if text in ("", "-") else int(text)


def kafka_view(capture_: Capture) -> dict[str, Any]:
    """What the tools say, as comparable data: ``offsets`` {(group, topic, partition): (offset, leader epoch)},
    ``groups`` {group: {state, group_epoch, assignment_epoch, members, protocol}} and ``members``
    {group: {member id: {...}}}, for consumer and classic groups, share groups and streams groups."""
    out = capture_.outputs
    offsets: dict[tuple[str, str, int], dict[str, int | None]] = {}
    for row in parse_tables(out["offsets"]) + parse_tables(out.get("streams_offsets", "")):
        if row.get("CURRENT-OFFSET", "-") in ("-", ""):
            continue
        committed: dict[str, int | None] = {"offset": int(row["CURRENT-OFFSET"])}
        if "LEADER-EPOCH" in row:  # printed with --verbose from 4.0 on
            committed["leader_epoch"] = _int(row["LEADER-EPOCH"])
        offsets[(row["GROUP"], row["TOPIC"], int(row["PARTITION"]))] = committed
    groups: dict[str, dict] = {}
    for row in parse_tables(out["state"]) + parse_tables(out.get("share_state", "")) \
            + parse_tables(out.get("streams_state", "")):
        group: dict[str, Any] = {"state": row["STATE"], "members": int(row["#MEMBERS"])}
        if "GROUP-EPOCH" in row:  # 3.9's tool prints no epochs
            group["group_epoch"] = _int(row["GROUP-EPOCH"])
            group["assignment_epoch"] = _int(row.get("TARGET-ASSIGNMENT-EPOCH", row.get("ASSIGNMENT-EPOCH", "-")))
        strategy = row.get("ASSIGNMENT-STRATEGY")
        if strategy is not None:  # a classic group's protocol (compared for classic groups only)
            group["protocol"] = None if strategy in ("-", "") else strategy
        groups[row["GROUP"]] = group
    members: dict[str, dict[str, dict]] = {}
    for row in parse_tables(out["members"]):
        if not row.get("CONSUMER-ID"):
            continue
        # what the version's tool prints (3.9 prints one ASSIGNMENT column and no epochs)
        member: dict[str, Any] = {"client_id": row["CLIENT-ID"], "host": row["HOST"],
                                  "instance_id": row.get("GROUP-INSTANCE-ID") or None}
        assignment = row.get("CURRENT-ASSIGNMENT", row.get("ASSIGNMENT", "-"))
        if assignment.startswith("("):
            member["assignment_unnamed"] = parse_unnamed_assignment(assignment)
        else:
            member["assignment"] = parse_assignment(assignment)
        if "CURRENT-EPOCH" in row:
            member["member_epoch"] = _int(row["CURRENT-EPOCH"])
        if "TARGET-EPOCH" in row:
            member["target_epoch"] = _int(row["TARGET-EPOCH"])
            member["target_assignment"] = parse_assignment(row.get("TARGET-ASSIGNMENT", "-"))
        if "UPGRADED" in row or "TARGET-EPOCH" in row:
            member["upgraded"] = None if "UPGRADED" not in row else row["UPGRADED"] == "true"
        members.setdefault(row["GROUP"], {})[row["CONSUMER-ID"]] = member
    for row in parse_tables(out.get("share_members", "")):
        share_member = {"client_id": row["CLIENT-ID"], "host": row["HOST"],
                        "assignment": parse_assignment(row["ASSIGNMENT"])}
        if "MEMBER-EPOCH" in row:
            share_member["member_epoch"] = _int(row["MEMBER-EPOCH"])
        members.setdefault(row["GROUP"], {})[row["CONSUMER-ID"]] = share_member
    for row in parse_tables(out.get("streams_members", "")):
        tasks = parse_streams_tasks(row.get("ASSIGNMENTS", ""))
        members.setdefault(row["GROUP"], {})[row["MEMBER"]] = {
            "client_id": row["CLIENT-ID"], "process_id": row["PROCESS"], "member_epoch": _int(row["MEMBER-EPOCH"]),
            "classic": row["MEMBER-PROTOCOL"] == "classic", "topology_epoch": _int(row["TOPOLOGY-EPOCH"]),
            "target_epoch": _int(row["TARGET-ASSIGNMENT-EPOCH"]), "tasks": tasks["current"],
            "target_tasks": tasks["target"],
        }
    listed = {row["GROUP"]: row["STATE"] for row in parse_tables(out["list"])}
    return {"offsets": offsets, "groups": groups, "members": members, "listed": listed}


# -- the replay, in the same shape --------------------------------------------------------------------------------


def records_below(records: Iterable[dict], end_offsets: Mapping[int, int]) -> list[dict]:
    """The records of each ``__consumer_offsets`` partition below ``end_offsets`` (what the tools described)."""
    return [r for r in records if r["offset"] < end_offsets.get(r["partition"], 0)]


def segment_records(log_dir: Path, quarantine: list | None = None) -> list[dict]:
    """Every record of the ``__consumer_offsets-N`` folders under ``log_dir``, in log order per partition."""
    from offsets_audit.sources.segments import read_segment

    records: list[dict] = []
    for folder in sorted(log_dir.glob(f"{OFFSETS_TOPIC}-*"), key=lambda p: int(p.name.rsplit("-", 1)[1])):
        for segment in sorted(folder.glob("*.log")):
            records.extend(read_segment(segment, quarantine=quarantine))
    return records


def live_records(bootstrap: str, end_offsets: Mapping[int, int]) -> list[dict]:
    """``__consumer_offsets`` read live through the package's kafka-python source (its pure core, read_committed)
    up to ``end_offsets``, with timestamps as epoch milliseconds like the segments reader's."""
    from offsets_audit.sources.kafka import plan_ranges, read_range

    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": OFFSETS_TOPIC,
               "endingOffsets": json.dumps({OFFSETS_TOPIC: {str(p): o for p, o in end_offsets.items()}})}
    rows = []
    for offset_range in plan_ranges(options):
        for row in read_range(options, offset_range):
            stamp = row["timestamp"]
            rows.append({**row, "timestamp": int(stamp.timestamp() * 1000) if isinstance(stamp, datetime) else stamp})
    return sorted(rows, key=lambda r: (r["partition"], r["offset"]))


def _named(partitions: Mapping[str, Any] | None, names: Mapping[str, str]) -> dict[str, list[int]]:
    """``{topic id: [p] or {p: epoch}}`` as ``{topic name: sorted partitions}`` (ids Kafka does not know kept)."""
    out: dict[str, list[int]] = {}
    for topic_id, parts in (partitions or {}).items():
        if parts:
            out[names.get(topic_id, topic_id)] = sorted(int(p) for p in parts)
    return out


def _tasks(tasks: Mapping[str, Any] | None) -> dict[str, dict[str, list[int]]]:
    return {kind: {sub: sorted(int(p) for p in parts) for sub, parts in ((tasks or {}).get(kind) or {}).items() if parts}
            for kind in ("active", "standby", "warmup")}


def replay_view(result, names: Mapping[str, str]) -> dict[str, Any]:
    """The pure replay's groups, members and committed offsets in ``kafka_view``'s shape."""
    return table_view([fold.state_row() for fold in result.groups.values()],
                      [row for fold in result.groups.values() for row in fold.member_rows()],
                      result.offsets.committed_rows(), names)


def job_view(output: Path, names: Mapping[str, str], spark) -> dict[str, Any]:
    """The job's written ``group_state``, ``members`` and ``offsets`` tables in ``kafka_view``'s shape."""
    def rows(table: str) -> list[dict]:
        return [row.asDict() for row in spark.read.parquet(str(output / table)).collect()]

    offsets = [row for row in rows("offsets") if row.get("status") in (None, "committed")]
    return table_view(rows("group_state"), rows("members"), offsets, names)


def table_view(state_rows: Iterable[Mapping], member_rows: Iterable[Mapping], offset_rows: Iterable[Mapping],
               names: Mapping[str, str]) -> dict[str, Any]:
    """Rows of the replay's ``group_state``, ``members`` and ``offsets`` tables (the pure replay's or the job's)
    in ``kafka_view``'s shape, topic ids named through ``kafka-topics``."""
    offsets = {}
    for c in offset_rows:
        partition = c["partition"] if "topic_partition" not in c else c["topic_partition"]
        epoch = c["committed_leader_epoch"]
        offsets[(c["group_id"], c["topic"], partition)] = {"offset": c["committed_offset"],
                                                            "leader_epoch": None if epoch in (None, -1) else epoch}
    by_group: dict[str, list[Mapping]] = {}
    for row in member_rows:
        by_group.setdefault(row["group_id"], []).append(row)
    groups: dict[str, dict] = {}
    members: dict[str, dict[str, dict]] = {}
    with_offsets = {g for g, _, _ in offsets}
    states = {row["group_id"]: row for row in state_rows}
    for group_id in sorted(set(states) | with_offsets):
        state = states.get(group_id) or {"exists": False, "group_type": None, "num_members": 0}
        if not state["exists"] and group_id not in with_offsets:
            continue
        kind = state["group_type"] if state["exists"] else None
        entry: dict[str, Any] = {"state": str(state["state"]) if state["exists"] else "Empty",
                                 "members": state["num_members"] if state["exists"] else 0}
        if kind in ("consumer", "share", "streams"):
            entry["group_epoch"] = state["group_epoch"]
            entry["assignment_epoch"] = state["assignment_epoch"]
        else:
            entry["group_epoch"] = entry["assignment_epoch"] = None
            entry["protocol"] = state.get("protocol") or None
        groups[group_id] = entry
        group_members = {}
        rows_ = by_group.get(group_id, []) if state["exists"] else []
        has_classic = any(row["classic_protocol"] for row in rows_)
        for row in rows_:
            member = json.loads(row["member_json"])
            if kind == "classic":
                decoded = member.get("assignment_decoded") or {}
                assignment = {p["topic"]: sorted(p["partitions"]) for p in decoded.get("assignedPartitions", [])
                              if p["partitions"]}
                group_members[row["member_id"]] = {
                    "instance_id": row["instance_id"], "client_id": row["client_id"], "host": row["client_host"],
                    "member_epoch": None, "assignment": assignment, "target_epoch": None, "target_assignment": {},
                    "upgraded": None}
            elif kind == "consumer":
                group_members[row["member_id"]] = {
                    "instance_id": row["instance_id"], "client_id": row["client_id"], "host": row["client_host"],
                    "member_epoch": row["member_epoch"], "assignment": _named(member["assigned_partitions"], names),
                    "target_epoch": state["assignment_epoch"],
                    "target_assignment": _named(member.get("target_assignment"), names),
                    "upgraded": (not row["classic_protocol"]) if has_classic else None}
            elif kind == "share":
                group_members[row["member_id"]] = {
                    "client_id": row["client_id"], "host": row["client_host"], "member_epoch": row["member_epoch"],
                    "assignment": _named(member["assigned_partitions"], names)}
            elif kind == "streams":
                group_members[row["member_id"]] = {
                    "client_id": row["client_id"], "process_id": row["process_id"],
                    "member_epoch": row["member_epoch"], "classic": bool(row["classic_protocol"]),
                    "topology_epoch": row["topology_epoch"], "target_epoch": state["assignment_epoch"],
                    "tasks": _tasks(member.get("assigned_tasks")), "target_tasks": _tasks(member.get("target_assignment"))}
        for member in group_members.values():
            if "assignment" in member:
                member["assignment_unnamed"] = unnamed(member["assignment"])
        if group_members:
            members[group_id] = group_members
    return {"offsets": offsets, "groups": groups, "members": members}


def differences(kafka: Mapping[str, Any], ours: Mapping[str, Any], groups: Iterable[str] | None = None) -> list[str]:
    """One line per value the tools and the replay disagree on (restricted to ``groups`` when given): every
    committed offset, every group's state and epochs, every member's epochs and assignments."""
    wanted = None if groups is None else set(groups)
    lines: list[str] = []

    def keep(group: str) -> bool:
        return wanted is None or group in wanted

    for key in sorted(set(kafka["offsets"]) | set(ours["offsets"])):
        theirs_offset, our_offset = kafka["offsets"].get(key), ours["offsets"].get(key)
        if keep(key[0]) and (theirs_offset is None or our_offset is None
                             or any(theirs_offset[k] != our_offset.get(k) for k in theirs_offset)):
            lines.append(f"offset {key}: kafka {theirs_offset} ours {our_offset}")
    for group in sorted(set(kafka["groups"]) | set(ours["groups"])):
        if not keep(group):
            continue
        theirs, mine = kafka["groups"].get(group), ours["groups"].get(group)
        if theirs is None or mine is None:
            lines.append(f"group {group}: kafka {theirs} ours {mine}")
            continue
        for name in sorted(set(theirs) & set(mine)):
            if theirs[name] != mine[name]:
                lines.append(f"group {group} {name}: kafka {theirs[name]!r} ours {mine[name]!r}")
    for group in sorted(set(kafka["members"]) | set(ours["members"])):
        if not keep(group):
            continue
        theirs, mine = kafka["members"].get(group, {}), ours["members"].get(group, {})
        for member in sorted(set(theirs) | set(mine)):
            if member not in theirs or member not in mine:
                lines.append(f"member {group}/{member}: kafka {theirs.get(member)} ours {mine.get(member)}")
                continue
            for name in sorted(theirs[member]):
                if theirs[member][name] != mine[member].get(name):
                    lines.append(f"member {group}/{member} {name}: kafka {theirs[member][name]!r} "
                                 f"ours {mine[member].get(name)!r}")
    return lines


# -- a copy of a user's log dir -----------------------------------------------------------------------------------

USAGE = """\
Compare a copy of your own cluster's __consumer_offsets with Kafka's own tools:

    python tests/real_kafka.py compare LOG_DIR [--kafka-version V] [--describe DIR] [--work DIR]

LOG_DIR holds __consumer_offsets-N folders copied from your brokers. The command runs kafka-dump-log
--offsets-decoder (Kafka V's, resolved by Maven) over every segment and compares every record with this package's
decode; replays the log and audits it (findings at warning or above are listed). With --describe DIR, a folder of
the outputs of Kafka's tools taken from the cluster when the copy was made (offsets.txt: kafka-consumer-groups
--describe --all-groups --offsets --verbose; members.txt: ... --members --verbose; state.txt: ... --state --verbose;
list.txt: --list --state; topics.txt: kafka-topics --describe; optionally share_members.txt, share_state.txt,
streams_members.txt, streams_state.txt, streams_offsets.txt, and end_offsets.json: {"partition": end offset} of
__consumer_offsets when they were taken), it also compares the replayed groups, members and committed offsets
with them. Exit 0 when everything agrees, 1 when something differs (printed), 2 on a usage mistake.
"""


def compare_log_dir(log_dir: Path, version: str, describe: Path | None, work: Path, out=None) -> int:
    """The ``compare`` command: decode vs kafka-dump-log, the audit, and (with ``describe``) the replay vs the
    tools' description. Returns the exit code."""
    import sys

    from offsets_audit.audit import audit_events
    from offsets_audit.config import load_settings
    from offsets_audit.replay import replay_records

    out = out or sys.stdout
    segments = sorted(log_dir.glob(f"{OFFSETS_TOPIC}-*/*.log"))
    if not segments:
        print(f"error: no {OFFSETS_TOPIC}-N/*.log under {log_dir}: pass the folder holding the copied partition "
              "folders", file=sys.stderr)
        return 2
    failed = False
    dumped = run_tools([dump_log_invocation(version, segments)], version, work)[0].check().stdout
    theirs, (ours, quarantine) = parse_dump_log(dumped), our_dump_log(segments)
    mismatches = [(name, offset) for name in sorted(set(theirs) | set(ours))
                  for offset in sorted(set(theirs.get(name, {})) | set(ours.get(name, {})))
                  if theirs.get(name, {}).get(offset) != ours.get(name, {}).get(offset)]
    records = sum(len(entries) for entries in ours.values())
    print(f"decode: {records:,} records in {len(segments)} segments; {len(mismatches)} differ from kafka-dump-log; "
          f"{len(quarantine)} quarantined", file=out)
    for name, offset in mismatches[:20]:
        print(f"  {name} offset {offset}:\n    kafka-dump-log {theirs.get(name, {}).get(offset)}\n"
              f"    offsets-audit  {ours.get(name, {}).get(offset)}", file=out)
    failed |= bool(mismatches)
    all_records = segment_records(log_dir)
    major, minor = version_key(version)[:2]
    config = load_settings().replace(broker={"kafka_version": f"{major}.{minor}"})
    findings, _ = audit_events(replay_records(all_records).events, config)
    serious = [f for f in findings if f.severity in ("warning", "error")]
    print(f"audit: {len(findings)} finding(s), {len(serious)} at warning or above", file=out)
    for f in serious[:20]:
        print(f"  {f.severity} {f.rule} {f.group_id}: {f.message}", file=out)
    if describe is not None:
        outputs = {p.stem: p.read_text() for p in describe.glob("*.txt")}
        missing = [name for name in ("offsets", "members", "state", "list", "topics") if name not in outputs]
        if missing:
            print(f"error: {describe} lacks {', '.join(n + '.txt' for n in missing)} (see --help)", file=sys.stderr)
            return 2
        ends_path = describe / "end_offsets.json"
        ends = ({int(k): v for k, v in json.loads(ends_path.read_text()).items()} if ends_path.exists()
                else {r["partition"]: r["offset"] + 1 for r in all_records})
        described = Capture(version, ends, outputs)
        lines = differences(kafka_view(described),
                            replay_view(replay_records(records_below(all_records, ends)), topic_names(outputs["topics"])))
        print(f"replay: {len(lines)} difference(s) from the tools' description", file=out)
        for line in lines[:50]:
            print(f"  {line}", file=out)
        failed |= bool(lines)
    return 1 if failed else 0


#: Real brokers' runs kept in the repository (``vendor``): their segments and the tools' outputs, so the
#: judges run on every version of the matrix in the default suite without a JVM.
VENDORED = Path(__file__).resolve().parent / "real_kafka_logs"


def vendor_run(run: Path, dest: Path) -> None:
    """Keep a ``test_real_kafka`` run (its ``log/`` copy and ``capture/``) under ``dest``: the
    ``__consumer_offsets`` segments as they are, the tools' outputs xz-compressed, the scenarios' report."""
    import lzma

    shutil.rmtree(dest, ignore_errors=True)
    log_dir = run / "log"
    for segment in sorted(log_dir.glob(f"{OFFSETS_TOPIC}-*/*.log")):
        target = dest / segment.parent.name / segment.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(segment, target)
    tools = dest / "tools"
    tools.mkdir(parents=True)
    for output in sorted((run / "capture").glob("*.txt")):
        with lzma.open(tools / (output.name + ".xz"), "wt", encoding="utf-8", preset=9) as handle:
            handle.write(output.read_text().replace(str(log_dir) + "/", ""))
    shutil.copyfile(run / "capture" / "end_offsets.json", dest / "end_offsets.json")
    shutil.copyfile(run / "scenarios" / "scenarios.json", dest / "scenarios.json")


def vendored_capture(folder: Path) -> Capture:
    """A vendored run's tools' outputs and end offsets, as ``capture`` returned them."""
    import lzma

    outputs = {}
    for path in sorted((folder / "tools").glob("*.txt.xz")):
        with lzma.open(path, "rt", encoding="utf-8") as handle:
            outputs[path.name[:-len(".txt.xz")]] = handle.read()
    ends = {int(k): v for k, v in json.loads((folder / "end_offsets.json").read_text()).items()}
    return Capture(folder.name, ends, outputs)


def main(argv: Sequence[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="real_kafka.py", description=USAGE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    compare = sub.add_parser("compare", help="compare a copied log dir with Kafka's tools")
    compare.add_argument("log_dir", type=Path)
    compare.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION,
                         help=f"Kafka version whose tools judge (default {DEFAULT_KAFKA_VERSION}); use your brokers'")
    compare.add_argument("--describe", type=Path, help="folder of the tools' outputs taken with the copy")
    compare.add_argument("--work", type=Path, default=Path(".cache") / "real-kafka-compare",
                         help="scratch folder for the tools' JVM")
    vendor = sub.add_parser("vendor", help="keep a test_real_kafka run in tests/real_kafka_logs/<version>")
    vendor.add_argument("run", type=Path, help="the run's folder (under pytest's --basetemp: real-kafka-<version>0)")
    vendor.add_argument("version")
    args = parser.parse_args(argv)
    if args.command == "vendor":
        vendor_run(args.run, VENDORED / args.version)
        return 0
    return compare_log_dir(args.log_dir, args.kafka_version, args.describe, args.work)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main(sys.argv[1:]))
