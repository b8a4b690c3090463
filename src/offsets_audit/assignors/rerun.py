"""Re-run the group's assignor (and what-if assignors) on every recorded target assignment; compare.

Pure core of the assignor audit: ``audit_group(rows, snapshot, what_if, offsets)`` returns the
``assignor_audit`` rows of one group (``ASSIGNOR_AUDIT_COLUMNS``). One ``rerun`` row per recorded target
assignment says whether Kafka's assignor, fed the input rebuilt by ``inputs.reconstruct_group``, gives
the recorded target (``match``); ``what_if`` rows show what another assignor would have done and never
count as mismatches (``match`` is null there, ``same_as_recorded`` tells).

Re-runs follow the order the coordinator iterated (``current_order`` column, docs/rules.md). The current
assignment it hands its assignor is the previous target as ``Assignment.fromRecord`` rebuilt it (a default
``HashMap`` filled in record order, ``new HashSet<>(partitions)``), and the order-sensitive assignors (uniform,
simple) break ties by that order. Kafka writes each target record in its output map's iteration order, so record
order is exact on Kafka's logs and every re-run first runs in it (``record_order``, the fast ``run`` path). Where
that does not give the recorded target, the re-run is repeated with the chain (``RerunChain``): the previous
matching re-runs' outputs in Java iteration order, carried forward as ``assign_chained`` does in the golden
scenarios (``chained``), which recovers an order lost on the way. The chain breaks at the group's first recorded
assignment, a new incarnation or a conversion from classic, a change of assignor and a re-run that matched in
neither order. What-if rows, streams groups and plug-ins take record order; ``range`` ignores the current
assignment (``not_order_sensitive``).

Each ``rerun`` row also carries ``rerun_cpu_ms``, the first re-run's thread CPU time (``TIMING_COLUMN``).

The group's assignor is the one its coordinator ran (``group_configs.assignor_choice``: the brokers' default
consumer assignor, a streams group's ``streams.assignor.name``). One this installation cannot run (a custom
assignor on the brokers) gives a ``not_rerun`` row naming it instead of a re-run: never a mismatch.

Balance metrics per row: ``spread`` = max - min partitions (streams: active tasks) per member, and,
where committed and end offsets are known, ``lag_spread`` = max - min summed lag per member.
"""

from __future__ import annotations

import json
import pickle
import time
import zlib
from typing import Any, Iterable, Mapping, Sequence

from offsets_audit.assignors import (
    builtin_name,
    is_chainable,
    is_order_insensitive,
    is_registered,
    preload,
    run_chained,
)
from offsets_audit.assignors import run as run_assignor
from offsets_audit.assignors.inputs import (
    INFERRED,
    AssignorRun,
    GroupReconstruction,
    TopicNames,
    in_log_order,
    reconstruct_group,
)
from offsets_audit.assignors.uniform import BEFORE_4_0 as UNIFORM_BEFORE_4_0
from offsets_audit.group_configs import UNKNOWN_ASSIGNOR
from offsets_audit.assignors.topic_metadata import TopicMetadata

ASSIGNOR_AUDIT_COLUMNS = (
    "group_id", "group_type", "assignment_epoch", "assignment_timestamp", "partition", "offset", "kind",
    "assignor", "confidence", "metadata_source", "metadata_hash_match", "snapshot_hash_match", "match", "same_as_recorded",
    "moved_partitions", "member_count_diff", "recorded_spread", "result_spread", "recorded_lag_spread",
    "result_lag_spread", "num_members", "error", "notes", "current_order",
)
ASSIGNOR_AUDIT_DDL = (
    "group_id string, group_type string, assignment_epoch int, assignment_timestamp long, partition int, "
    "offset long, kind string, assignor string, confidence string, metadata_source string, "
    "metadata_hash_match boolean, snapshot_hash_match boolean, match boolean, same_as_recorded boolean, moved_partitions int, "
    "member_count_diff string, recorded_spread int, result_spread int, recorded_lag_spread long, "
    "result_lag_spread long, num_members int, error string, notes string, current_order string"
)

#: The re-run's time on the executor thread's CPU clock, in ms: the first run of the recorded assignor, as Kafka
#: ran it once (a chained repetition is not counted). Not a column of the written table (a clock reading differs
#: from run to run); the coordinator-load estimate reads it from the stage's DataFrame (``audit.coordinator_load``).
TIMING_COLUMN = "rerun_cpu_ms"
ASSIGNOR_AUDIT_TIMED_COLUMNS = (*ASSIGNOR_AUDIT_COLUMNS, TIMING_COLUMN)
ASSIGNOR_AUDIT_TIMED_DDL = ASSIGNOR_AUDIT_DDL + f", {TIMING_COLUMN} double"

#: ``current_order`` values: how the current assignment's Java iteration order was obtained.
ORDER_CHAINED = "chained"
ORDER_RECORDS = "record_order"
ORDER_NOT_SENSITIVE = "not_order_sensitive"

#: What-if assignors that read the consumer/share layout (streams groups only re-run their own assignor).
PARTITION_ASSIGNORS = frozenset({"uniform", "range", "simple", "lag_aware"})


def owners(result_members: Mapping[str, Mapping], group_type: str) -> dict[tuple, str]:
    """(topic or subtopology, partition) -> member, from a result's ``members`` (streams: active tasks)."""
    out = {}
    for member_id, assignment in (result_members or {}).items():
        if group_type == "streams":
            assignment = (assignment or {}).get("active_tasks") or {}
        for topic, partitions in (assignment or {}).items():
            for p in partitions or ():
                out[(topic, int(p))] = member_id
    return out


def member_counts(result_members: Mapping[str, Mapping], group_type: str) -> dict[str, int]:
    counts = {}
    for member_id, assignment in (result_members or {}).items():
        if group_type == "streams":
            assignment = (assignment or {}).get("active_tasks") or {}
        counts[member_id] = sum(len(p or ()) for p in (assignment or {}).values())
    return counts


def spread(counts: Mapping[str, int | float]) -> int | float | None:
    return (max(counts.values()) - min(counts.values())) if counts else None


def member_lags(result_members: Mapping[str, Mapping], lags: Mapping[tuple, int]) -> dict[str, int] | None:
    """Summed lag per member; ``None`` when no lag is known for any assigned partition."""
    if not lags:
        return None
    out = {}
    known = False
    for member_id, assignment in (result_members or {}).items():
        total = 0
        for topic, partitions in (assignment or {}).items():
            for p in partitions or ():
                lag = lags.get((topic, int(p)))
                if lag is not None:
                    known = True
                    total += lag
        out[member_id] = total
    return out if known else None


def compare(recorded: Mapping, result: Mapping, group_type: str) -> dict[str, Any]:
    """Differences between a recorded target and an assignor result (both in the ``run`` layout)."""
    rec_members = recorded.get("members") or {}
    res_members = result.get("members") or {}
    rec_owner = owners(rec_members, group_type)
    res_owner = owners(res_members, group_type)
    moved = sum(1 for key in set(rec_owner) | set(res_owner) if rec_owner.get(key) != res_owner.get(key))
    rec_counts = member_counts(rec_members, group_type)
    res_counts = member_counts(res_members, group_type)
    diff = {m: res_counts.get(m, 0) - rec_counts.get(m, 0) for m in sorted(set(rec_counts) | set(res_counts))}
    same = result.get("error") is None and _normalized(rec_members, group_type) == _normalized(res_members, group_type)
    return {"same": same, "moved_partitions": moved,
            "member_count_diff": json.dumps({m: d for m, d in diff.items() if d}, sort_keys=True),
            "recorded_spread": spread(rec_counts), "result_spread": spread(res_counts) if res_members else None}


def _normalized(members: Mapping, group_type: str) -> dict:
    """Members with their non-empty assignments. A member the assignor leaves out of its result gets an
    empty assignment from the coordinator (``TargetAssignmentBuilder``), so absent and empty compare equal."""
    out = {}
    for member_id, assignment in (members or {}).items():
        if group_type == "streams":
            norm: dict = {kind: {s: sorted(p) for s, p in ((assignment or {}).get(kind) or {}).items() if p}
                    for kind in ("active_tasks", "standby_tasks")}
        else:
            norm = {t: sorted(p) for t, p in (assignment or {}).items() if p}
        if any(norm.values()) if group_type == "streams" else norm:
            out[member_id] = norm
    return out


def lags_for(case_input: Mapping, offsets: Mapping[str, Mapping] | None) -> dict[tuple, int]:
    """(topic id, partition) -> lag where committed and end offsets are both known.

    ``offsets``: ``{topic name: {partition: {"committed": int|None, "end": int|None, "begin": int|None}}}``."""
    out: dict[tuple, int] = {}
    if not offsets:
        return out
    for topic in case_input.get("topics") or ():
        by_partition = offsets.get(topic["name"]) or {}
        for p, entry in by_partition.items():
            committed, end = entry.get("committed"), entry.get("end")
            if committed is not None and end is not None:
                out[(topic["id"], int(p))] = max(int(end) - int(committed), 0)
    return out


def _base_row(run: AssignorRun) -> dict:
    return {"group_id": run.group_id, "group_type": run.group_type, "assignment_epoch": run.assignment_epoch,
            "assignment_timestamp": run.assignment_timestamp, "partition": run.partition, "offset": run.offset,
            "confidence": run.confidence, "metadata_source": run.metadata_source,
            "metadata_hash_match": run.metadata_hash_match, "snapshot_hash_match": run.snapshot_hash_match,
            "num_members": len(run.case_input.get("members") or ())}


def _runnable(assignor: str) -> bool:
    """Whether ``assignor`` is a built-in, a registered or a plug-in (``module:attribute``) assignor."""
    return builtin_name(assignor) is not None or is_registered(assignor) or ":" in assignor


def _invoke(assignor: str, case_input: dict) -> dict:
    if not case_input.get("members"):
        return {"error": None, "members": {}}
    try:
        return run_assignor(assignor, case_input)
    except Exception as exc:  # an assignor bug or a bad input must not stop the audit of the other groups
        return {"error": type(exc).__name__, "message": str(exc)}


def _invoke_chained(assignor: str, case_input: dict, carried: Mapping | None) -> tuple[dict, dict | None, str]:
    """``(result, java_order, current_order)`` of one re-run continuing the group's chain."""
    if not case_input.get("members"):
        return {"error": None, "members": {}}, {}, ORDER_RECORDS
    try:
        result, java_order = run_chained(assignor, case_input, carried)
    except Exception as exc:  # an assignor bug or a bad input must not stop the audit of the other groups
        return {"error": type(exc).__name__, "message": str(exc)}, None, ORDER_RECORDS
    return result, java_order, _order_used(assignor, carried is not None and java_order is not None)


def _order_used(assignor: str, chained: bool) -> str:
    if is_order_insensitive(assignor):
        return ORDER_NOT_SENSITIVE
    return ORDER_CHAINED if chained else ORDER_RECORDS


class RerunChain:
    """The group's chain of matching re-runs since it last broke, for ``assign_chained``'s ``carried``.

    Kept lazily: each step stores its input, and the Java order of a step's output is computed (``assign_chained``,
    fed the previous step's) only when a later re-run needs it, i.e. when a re-run in record order did not match. On Kafka's logs record order is what the coordinator iterated, so the
    fast ``run`` path is all that runs; the chain costs something only where the order was lost. At most
    ``MAX_STEPS`` inputs are kept: the oldest kept step starts from record order (exact on Kafka's logs).
    """

    MAX_STEPS = 8

    def __init__(self) -> None:
        self.steps: list[tuple[str, dict, bool]] = []   # (assignor, case input, chained)
        self.orders: dict[int, dict | None] = {}         # step index -> Java order of its output
        self.first = 0                                    # index of steps[0]

    def continues(self, run: AssignorRun) -> bool:
        """Whether ``run`` continues the chain: same assignor, same incarnation (it has a current assignment)."""
        if not self.steps or self.steps[-1][0] != run.assignor:
            return False
        return any(m.get("current_assignment") for m in run.case_input.get("members") or ())

    def carried(self) -> dict | None:
        """The last step's output in Java iteration order (computing the chain's missing links)."""
        last = self.first + len(self.steps) - 1
        start = last
        while start > self.first and start - 1 not in self.orders:
            start -= 1
        for index in range(start, last + 1):
            if index in self.orders:
                continue
            # Every link is chained, also after a step that matched in record order: its input maps were built
            # from the previous output, and its output's Java order depends on that history even where the
            # content does not.
            assignor, case_input, _ = self.steps[index - self.first]
            carried = self.orders.get(index - 1) if index > self.first else None
            try:
                _, self.orders[index] = run_chained(assignor, case_input, carried)
            except Exception:  # an assignor bug: the chain ends here
                self.orders[index] = None
        return self.orders.get(last)

    def after(self, run: AssignorRun, matched: bool, chained: bool, java_order: dict | None = None) -> None:
        if not matched:
            self.steps, self.orders, self.first = [], {}, self.first + len(self.steps)
            return
        if not self.continues(run) and self.steps:
            self.first += len(self.steps)
            self.steps, self.orders = [], {}
        index = self.first + len(self.steps)
        self.steps.append((run.assignor, run.case_input, chained))
        if java_order is not None:
            self.orders[index] = java_order
        if len(self.steps) > self.MAX_STEPS:
            self.steps.pop(0)
            self.orders.pop(self.first, None)
            self.first += 1
            # the new first step starts from record order unless its output order is known already
            assignor, case_input, _ = self.steps[0]
            self.steps[0] = (assignor, case_input, False)


def _audit_run(run: AssignorRun, chain: RerunChain, *, what_if: Sequence[str],
               offsets: Mapping[str, Mapping] | None, auto_offset_reset: str) -> list[dict]:
    """The ``rerun`` row (continuing ``chain``, which it advances) and the ``what_if`` rows of one recorded
    target assignment."""
    out = []
    notes = list(run.notes)
    confidence = run.confidence
    if getattr(run, "origin", None) == "classic_conversion":
        row = _base_row(run)
        row.update(kind="not_rerun", assignor=run.assignor, confidence=confidence, match=None, same_as_recorded=None,
                   error=None, current_order=None, rerun_cpu_ms=None,
                   notes="; ".join(notes + ["the classic group's assignment, carried over by its conversion to a "
                                            "consumer group (ConsumerGroup.fromClassicGroup): no server assignor "
                                            "computed it"]))
        return [row]
    if run.assignor == UNKNOWN_ASSIGNOR:
        row = _base_row(run)
        row.update(kind="not_rerun", assignor=None, confidence=confidence, match=None, same_as_recorded=None,
                   error=None, current_order=None, rerun_cpu_ms=None,
                   notes="; ".join(notes + ["the cluster refused the group's configs, so its task assignor "
                                            "(streams.assignor.name) is not known: not re-run"]))
        return [row]
    if not _runnable(run.assignor):
        row = _base_row(run)
        row.update(kind="not_rerun", assignor=run.assignor, confidence=confidence, match=None, same_as_recorded=None,
                   error=None, current_order=None, rerun_cpu_ms=None,
                   notes="; ".join(notes + [f"the group's assignor {run.assignor!r} is not one this installation "
                                            "runs (a custom assignor on the brokers): not re-run"]))
        return [row]
    if run.group_type == "streams":
        notes.append("task offsets are reported in heartbeats, not written to the log: standby and "
                     "stickiness choices may differ")
        confidence = INFERRED
    lags = lags_for(run.case_input, offsets) if run.group_type != "streams" else {}
    rec_lags = member_lags(run.recorded["members"], lags)
    kinds = [("rerun", run.assignor)]
    if run.group_type != "streams":
        kinds += [("what_if", name) for name in what_if if name != run.assignor]
    for kind, assignor in kinds:
        case_input = run.case_input
        if assignor == "lag_aware":
            case_input = dict(case_input, offsets=offsets or {}, auto_offset_reset=auto_offset_reset)
        if kind == "rerun":
            # Record order first: it is what Assignment.fromRecord rebuilds, so on Kafka's logs it is exact
            # and the fast path is all that runs. Where it does not give the target, the chain's carried
            # Java order may (the order was lost on the way, or the log was written by something else).
            preload(assignor)
            began = time.thread_time()
            result, java_order, current_order = _invoke(assignor, case_input), None, _order_used(assignor, False)
            rerun_cpu_ms = (time.thread_time() - began) * 1e3
            cmp = compare(run.recorded, result, run.group_type)
            if (not cmp["same"] and current_order == ORDER_RECORDS and is_chainable(assignor)
                    and chain.continues(run)):
                carried = chain.carried()
                if carried is not None:
                    alt = _invoke_chained(assignor, case_input, carried)
                    alt_cmp = compare(run.recorded, alt[0], run.group_type)
                    if alt_cmp["same"]:
                        (result, java_order, current_order), cmp = alt, alt_cmp
            if not cmp["same"] and getattr(run, "before_4_0", False) is None and builtin_name(assignor) == "uniform":
                # The brokers' version is not configured: a target Kafka 3.x's uniform builder gives is no fault.
                older = dict(case_input, **{UNIFORM_BEFORE_4_0: True})
                older_result = _invoke(assignor, older)
                older_cmp = compare(run.recorded, older_result, run.group_type)
                if older_cmp["same"]:
                    notes.append("the target is what Kafka 3.x's uniform assignor gives (broker.kafka_version is "
                                 "not set; 4.0 and later hand out partitions otherwise)")
                    result, cmp, java_order, current_order = older_result, older_cmp, None, ORDER_RECORDS
            for tied in getattr(run, "tied_assignors", None) or () if not cmp["same"] else ():
                tied_result = _invoke(tied, case_input)
                tied_cmp = compare(run.recorded, tied_result, run.group_type)
                if tied_cmp["same"]:
                    notes.append(f"members prefer {assignor} and {tied} equally: the coordinator ran {tied}")
                    assignor, result, cmp = tied, tied_result, tied_cmp
                    java_order, current_order = None, _order_used(tied, False)
                    break
            chain.after(run, cmp["same"], current_order == ORDER_CHAINED, java_order)
        else:
            result, java_order, current_order = _invoke(assignor, case_input), None, _order_used(assignor, False)
            rerun_cpu_ms = None
            cmp = compare(run.recorded, result, run.group_type)
        res_lags = member_lags(result.get("members") or {}, lags) if result.get("error") is None else None
        row = _base_row(run)
        row.update(
            kind=kind, assignor=assignor, confidence=confidence,
            match=cmp["same"] if kind == "rerun" else None, same_as_recorded=cmp["same"],
            moved_partitions=cmp["moved_partitions"], member_count_diff=cmp["member_count_diff"],
            recorded_spread=cmp["recorded_spread"], result_spread=cmp["result_spread"],
            recorded_lag_spread=spread(rec_lags) if rec_lags else None,
            result_lag_spread=spread(res_lags) if res_lags else None,
            error=None if result.get("error") is None else f"{result['error']}: {result.get('message')}",
            notes="; ".join(notes) or None, current_order=current_order, rerun_cpu_ms=rerun_cpu_ms)
        out.append(row)
    return out


def audit_group(rows: Iterable[Mapping], snapshot: TopicMetadata | None = None, *, what_if: Sequence[str] = (),
                offsets: Mapping[str, Mapping] | None = None, auto_offset_reset: str = "latest",
                default_consumer_assignor: str = "uniform",
                streams_assignors: Mapping[str, str] | None = None, kafka_version: str | None = None) -> list[dict]:
    """``assignor_audit`` rows of one group: a ``rerun`` row per recorded assignment, plus ``what_if`` rows.

    ``default_consumer_assignor``: the brokers' default consumer assignor; ``streams_assignors``: streams group id
    -> its task assignor (``""``: the default) (``group_configs.assignor_choice``); ``kafka_version``: the
    brokers' (``broker.kafka_version``), which picks the uniform assignor's builder of that release."""
    out = []
    chain = RerunChain()
    for run in reconstruct_group(rows, snapshot, default_consumer_assignor=default_consumer_assignor,
                                 streams_assignors=streams_assignors, kafka_version=kafka_version):
        out += _audit_run(run, chain, what_if=what_if, offsets=offsets, auto_offset_reset=auto_offset_reset)
    return out


_STATE_FORMAT = 1


class GroupRerun:
    """The assignor audit of one group, resumable between incremental runs: the rows of ``audit_group`` over the
    group's whole target history, produced a few targets at a time (``feed``), with a small state in between
    (``to_bytes``).

    What a target's rebuilt input depends on, and what is kept for it:

    * the topic names of its ids: ``inputs.TopicNames`` (candidates per id, names learned; never revised);
    * the member table's order and the previous target's members: ``inputs.GroupReconstruction``;
    * the chain of matching re-runs, at most ``RerunChain.MAX_STEPS`` inputs: ``RerunChain``.

    Names can come from a *later* target than the one that needs them (an id first assigned while its members
    subscribed to two topics is named once a later target tells them apart). The batch audit uses them for the
    earlier target too (an id names one topic for its whole life), so a target whose topic ids are not all named
    yet is *pending*: it and every target after it (the chain runs through them) wait in the state and are re-run
    by the next ``feed``; ``provisional`` gives their rows as of now, without changing the state. Completed rows
    are final: every id they use is named, and names never change. On Kafka's logs a target's ids are named by
    its own subscriptions or its own metadata hash, so nothing stays pending for long.
    """

    def __init__(self, snapshot_given: bool, default_consumer_assignor: str = "uniform",
                 streams_assignors: Mapping[str, str] | None = None, kafka_version: str | None = None) -> None:
        self.names = TopicNames(use_hash=not snapshot_given)
        self.reconstruction = GroupReconstruction(default_consumer_assignor, streams_assignors, kafka_version)
        self.chain = RerunChain()
        self.pending: list[dict] = []

    def feed(self, rows: Iterable[Mapping], snapshot: TopicMetadata | None, *, what_if: Sequence[str] = (),
             offsets: Mapping[str, Mapping] | None = None, auto_offset_reset: str = "latest") -> list[dict]:
        """The completed ``assignor_audit`` rows after the group's next target rows (in log order after every
        row fed before)."""
        new = in_log_order(rows)
        for row in new:
            self.names.observe(row)
        waiting = self.pending + new
        out: list[dict] = []
        for index, row in enumerate(waiting):
            if not self.names.names_every_topic_of(row):
                self.pending = waiting[index:]
                return out
            run = self.reconstruction.build(row, snapshot, self.names.names)
            if run is not None:
                out += _audit_run(run, self.chain, what_if=what_if, offsets=offsets,
                                  auto_offset_reset=auto_offset_reset)
        self.pending = []
        return out

    def provisional(self, snapshot: TopicMetadata | None, *, what_if: Sequence[str] = (),
                    offsets: Mapping[str, Mapping] | None = None, auto_offset_reset: str = "latest") -> list[dict]:
        """Rows of the pending targets with the names known now (what a batch run over the log so far gives);
        the state is left as it was."""
        if not self.pending:
            return []
        copy = GroupRerun.from_bytes(self.to_bytes())
        out: list[dict] = []
        for row in copy.pending:
            run = copy.reconstruction.build(row, snapshot, copy.names.names)
            if run is not None:
                out += _audit_run(run, copy.chain, what_if=what_if, offsets=offsets,
                                  auto_offset_reset=auto_offset_reset)
        return out

    def to_bytes(self) -> bytes:
        """Compact state (zlib-compressed pickle), as ``audit.engine.GroupAudit`` keeps its own."""
        return bytes([_STATE_FORMAT]) + zlib.compress(pickle.dumps(self.__dict__, protocol=pickle.HIGHEST_PROTOCOL), 1)

    @classmethod
    def from_bytes(cls, data: bytes) -> GroupRerun:
        if not data or data[0] != _STATE_FORMAT:
            raise ValueError("assignor re-run state of another version: start a new checkpoint")
        rerun = cls.__new__(cls)
        rerun.__dict__.update(pickle.loads(zlib.decompress(data[1:])))
        return rerun
