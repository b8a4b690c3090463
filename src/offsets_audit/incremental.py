"""Incremental runs: replay and audit only what is new since the last run, state kept in a checkpoint.

``offsets-audit run --incremental --checkpoint PATH`` (``run_incremental``) is the nightly form of ``job.run_job``:
the replay's Structured Streaming queries (``replay.incremental``) read what arrived since the last run, and the
same ``transformWithStateInPandas`` processor that folds a group's records feeds the events it emits to the
group's resumable audit (``audit.engine.GroupAudit``), whose whole state sits in the same state store and is
committed with the same micro-batch. A rebalance that starts in one run and converges in the next is timed once,
and a finding is reported once, by the run whose records complete it.

What only the end of the log produces (``GroupAudit.finish``: a state still stuck, a rebalance still open,
the interval summary of ``assignment_interval_overridden``) is *provisional*: each run reports it in
``provisional_findings`` / ``provisional_rebalances`` for its own "now", from every group's stored audit state,
and the next run replaces it. So the findings (rebalances) of every run plus the last run's provisional ones
are, row for row and id for id, those of one batch run over the whole log.

Every run writes its tables through ``sinks.Output.write_run`` (under a path or by name) under its ``run_id`` (run manifest, every table even
when empty, a rerun of the run id replaces all it wrote), its HTML report and ``latency_daily``: the latency
summary of every day this run's rebalances touch, over all rebalances of those days so far. Which micro-batches
a run covers is kept in ``PATH/runs.json``: a run covers every batch since the last *published* run, so a run
killed before publishing is covered again by its rerun (with any run id); rerunning the last published run id
covers its batches again and replaces its tables.
"""
from __future__ import annotations

import base64
import hashlib
import json
import sys
import time

import pandas as pd

from offsets_audit.audit.engine import GroupAudit
from offsets_audit.audit.latency import REBALANCE_COLUMNS
from offsets_audit.audit.model import FINDING_ROW_DDL
from offsets_audit.audit.offsets_spark import OFFSET_RULES
from offsets_audit.audit.rules.registry import rule_settings
from offsets_audit.audit.spark import EVENT_RANK, REBALANCES_DDL, latency_summary, rebalance_causes
from offsets_audit.errors import UserError
from offsets_audit.plans import side_by_side
from offsets_audit.replay import incremental as replay_incremental
from offsets_audit.sinks.summary import run_figures
from offsets_audit.spark_session import frees_its_plans, release_run

_ROWS_DDL = "kind string, group_id string, payload string"
#: Rule families the incremental audit does not evaluate (none: the offset rules run incrementally too,
#: ``audit.offsets_incremental``). A run on a checkpoint whose earlier runs kept no offset-rule state reports
#: the offset rules skipped in its summary (``skipped_rules``), never as zero findings.
SKIPPED_RULES: tuple[str, ...] = ()
RUNS_FILE = "runs.json"
#: ``PATH/offset_rules/run=<run_id>/<name>``: the offset rules' state a run leaves for the next.
OFFSET_STATE_FOLDER = "offset_rules"


class GroupAuditStep:
    """The fold processor's extension (``replay.incremental.fold_processor_class``): feeds the events the fold
    just emitted for a group to the group's ``GroupAudit`` and returns what the audit produced, as rows of kind
    ``finding``, ``rebalance``, ``context``, ``ownership`` (the offset rules' timeline) and ``audit_state`` (the
    state as base64, for the provisional tail of the run)."""

    def __init__(self, config: dict) -> None:
        self.config = config
        self.settings = rule_settings(config)

    def __call__(self, group_id: str, rows: list[tuple], stored: bytes | None) -> tuple[list[tuple], bytes]:
        events = [json.loads(payload) for kind, _, payload in rows if kind == "event"]
        events.sort(key=lambda e: (e["partition"], e["offset"], EVENT_RANK.get(e["event"], 2)))
        audit = (GroupAudit.from_bytes(stored, self.config, settings=self.settings) if stored is not None
                 else GroupAudit(group_id, self.config, settings=self.settings, timeline=True))
        audit.feed(events)
        findings, rebalances, context, ownership = audit.take()
        state = audit.to_bytes()
        out = [("finding", group_id, json.dumps(f.to_dict())) for f in findings]
        out += [("rebalance", group_id, json.dumps(r)) for r in rebalances]
        out += [("context", group_id, json.dumps(r)) for r in context]
        out += [("ownership", group_id, json.dumps(r)) for r in ownership]
        out.append(("audit_state", group_id, base64.b64encode(state).decode("ascii")))
        return out, state


def provisional_rows(rows, config: dict, end_time_ms: int | None):
    """``finding`` / ``rebalance`` rows that the end of the log at ``end_time_ms`` would add, per group, from
    each group's newest stored audit state in ``rows`` (one row per group: O(groups), never O(records)), and a
    ``horizon`` row (payload: the clock in ms) for each group whose rows a later clock could change
    (``GroupAudit.provisional_until``)."""
    latest = replay_incremental.latest_per_group(rows, "audit_state").select("group_id", "payload")
    settings = rule_settings(config)

    def run(batches):
        for pdf in batches:
            out = []
            for group_id, payload in zip(pdf["group_id"], pdf["payload"]):
                audit = GroupAudit.from_bytes(base64.b64decode(payload), config, settings=settings)
                findings, rebalances, horizon = audit.provisional_until(end_time_ms)
                out += [("finding", group_id, json.dumps(f.to_dict())) for f in findings]
                out += [("rebalance", group_id, json.dumps(r)) for r in rebalances]
                if horizon is not None:
                    out.append(("horizon", group_id, str(horizon)))
            yield pd.DataFrame(out, columns=["kind", "group_id", "payload"])

    return latest.mapInPandas(run, _ROWS_DDL)


def _tail_settings(config: dict) -> str:
    """What a group's provisional results depend on besides its audit state and the clock: the audit's
    settings. A run can carry the last run's tail of a group only when these are the same."""
    audited = {k: v for k, v in config.items() if k not in ("run_id", "output", "source", "spark")}
    return hashlib.sha256(json.dumps(audited, sort_keys=True, default=str).encode()).hexdigest()


def provisional_tail(history, new_rows, config: dict, clock: int | None, carry: bool):
    """``(tail, how, due)``: the provisional ``finding`` / ``rebalance`` / ``horizon`` rows for ``clock``, what
    was done, and the groups recomputed (``group_id``; None when every group was).

    With ``carry`` (the last run's snapshot holds its tail, with horizons, for the same settings), only the
    groups whose tail can differ are recomputed: those with new audit state (``new_rows``; None when nothing is
    new) and those whose horizon the clock reached (a stuck-state or pending-transaction timer ran out, or one
    already out is measured to the new clock). Every other group's rows are carried from the snapshot: O(touched
    groups). Otherwise every group's newest audit state is deserialised and finished on a copy (O(groups))."""
    from pyspark.sql import functions as F

    if not carry or clock is None:
        return provisional_rows(history, config, clock), "recomputed for every group", None
    back = {new: old for old, new in replay_incremental.TAIL_KINDS.items()}
    carried = replay_incremental.latest_tails(history).select(
        replay_incremental.renamed_kinds(back).alias("kind"), "group_id", "payload")
    due = carried.filter((F.col("kind") == "horizon") & (F.col("payload").cast("long") <= F.lit(clock))).select(
        "group_id")
    if new_rows is not None:
        due = due.unionByName(new_rows.filter(F.col("kind") == "audit_state").select("group_id"))
    due = due.distinct()
    recomputed = provisional_rows(history.join(due, "group_id", "left_semi"), config, clock)
    how = ("carried from the last run (nothing new), recomputed for any group whose timers the clock reached"
           if new_rows is None else
           "recomputed for the touched groups and those whose timers the clock reached, carried for the others")
    return carried.join(due, "group_id", "left_anti").unionByName(recomputed), how, due


def _findings(rows):
    from pyspark.sql import functions as F

    return (rows.filter(F.col("kind") == "finding").select(F.from_json("payload", FINDING_ROW_DDL).alias("f"))
            .select("f.*").withColumn("time", F.timestamp_millis(F.col("time"))))


def _rebalances(rows):
    from pyspark.sql import functions as F

    return (rows.filter(F.col("kind") == "rebalance").select(F.from_json("payload", REBALANCES_DDL).alias("r"))
            .select("r.*").select(*REBALANCE_COLUMNS))


# -- the assignor re-runs ----------------------------------------------------------------------------------

#: ``PATH/assignor_state/run=<run_id>/``: each group's resumable re-run state a run leaves for the next.
ASSIGNOR_STATE_FOLDER = "assignor_state"


def assignor_audit(spark, config: dict, checkpoint: str, runs: list[dict], fold_range: list[int],
                   history, offsets):
    """``(assignor_audit, provisional_assignor_audit, next_state)`` of the target assignments written in
    ``fold_range``; None when the assignor audit is off.

    Each group with new targets resumes its re-run state (``assignors.rerun.GroupRerun``: topic names learned so
    far, member order, previous target, the chain) from the last published run and re-runs only the new targets,
    plus any still waiting for a topic name (pending: provisional rows until a later target names it). Untouched
    groups' state is carried over as it is. A checkpoint whose last run kept no re-run state is resumed once
    from its recorded targets (``history``: ``replay.incremental.history_rows``, whose snapshot keeps the
    targets when its run kept no re-run state), keeping only the new targets' rows."""
    from pyspark.sql import functions as F

    from offsets_audit.assignors import spark as assignor_spark
    from offsets_audit.assignors.rerun import ASSIGNOR_AUDIT_COLUMNS, ASSIGNOR_AUDIT_DDL

    if not config["assignors"]["audit"]:
        return None
    topic_metadata = None
    if config["topic_metadata"]["source"] == "file":
        from offsets_audit.assignors.topic_metadata import read_topic_metadata
        topic_metadata = read_topic_metadata(spark, config["topic_metadata"]["path"])
    what_if = list(config["assignors"]["what_if"])
    if config["assignors"]["custom"]:
        from offsets_audit.assignors.plugin import load_assignor

        load_assignor(config["assignors"]["custom"])  # fail fast on the driver with a one-line error
        what_if.append(config["assignors"]["custom"])
    state = None
    resumed_from_targets = False
    if runs and runs[-1].get("assignor_state"):
        state = (spark.read.schema(assignor_spark.RERUN_STATE_DDL)
                 .parquet(f"{checkpoint}/{ASSIGNOR_STATE_FOLDER}/run={runs[-1]['run_id']}"))
    elif runs:
        resumed_from_targets = True
    targets = (history if resumed_from_targets else replay_incremental.fold_rows(spark, checkpoint, fold_range)) \
        .filter(F.col("kind") == "target")
    from offsets_audit.group_configs import assignor_choice

    choice = assignor_choice(config)
    resumed = assignor_spark.audit_resumed(targets, state, topic_metadata, what_if=what_if, offsets=offsets,
                                           default_consumer_assignor=choice["consumer"] or "uniform",
                                           streams_assignors=choice["streams"]).persist()

    def rows(kind):
        found = (resumed.filter(F.col("kind") == kind).select(F.from_json("payload", ASSIGNOR_AUDIT_DDL).alias("r"))
                 .select(*[F.col(f"r.{c}") for c in ASSIGNOR_AUDIT_COLUMNS]))
        if resumed_from_targets:  # resumed from the recorded targets: keep only the new targets' rows
            new = replay_incremental.parsed(replay_incremental.fold_rows(spark, checkpoint, fold_range), "target",
                                            "group_id string, partition int, offset long")
            found = found.join(new.select("group_id", "partition", "offset"), ["group_id", "partition", "offset"],
                               "left_semi").select(*ASSIGNOR_AUDIT_COLUMNS)
        return found

    touched = resumed.filter(F.col("kind") == "state").select("group_id", "pending", "state")
    next_state = touched if state is None else state.join(touched.select("group_id"), "group_id",
                                                          "left_anti").unionByName(touched)
    return rows("rerun"), rows("provisional"), next_state, resumed


def assignor_mismatches(audited, config: dict):
    """``assignor_mismatch`` finding rows (``FINDING_ROW_DDL``) of ``assignor_audit`` rows that did not match."""
    from pyspark.sql import functions as F

    from offsets_audit.audit.rules.assignor import assignor_findings

    settings = rule_settings(config)
    if audited is None or not settings["assignor_mismatch"]["enabled"]:
        return None

    def plain(value):
        if isinstance(value, (list, dict, str)) or value is None:
            return value
        if pd.isna(value):
            return None
        return value.item() if hasattr(value, "item") else value

    def run(batches):
        for pdf in batches:
            rows = [{k: plain(v) for k, v in r.items()} for r in pdf.to_dict("records")]
            yield pd.DataFrame([f.to_dict() for f in assignor_findings(rows, settings)],
                               columns=[c.split()[0] for c in FINDING_ROW_DDL.split(", ")])

    return audited.filter(F.col("match") == F.lit(False)).mapInPandas(run, FINDING_ROW_DDL)


# -- the offset rules -------------------------------------------------------------------------------------------

def _offset_state(spark, checkpoint: str, runs: list[dict]):
    """The offset rules' state the last published run left (``empty_state`` before the first run), or None when
    that run kept none (its checkpoint predates incremental offset rules: they cannot be resumed)."""
    from offsets_audit.audit.offsets_incremental import OFFSET_STATE_DDLS, empty_state

    if not runs:
        return empty_state(spark)
    if not runs[-1].get("offset_rules"):
        return None
    folder = f"{checkpoint}/{OFFSET_STATE_FOLDER}/run={runs[-1]['run_id']}"
    return {name: spark.read.schema(ddl).parquet(f"{folder}/{name}") for name, ddl in OFFSET_STATE_DDLS.items()}


def offset_rule_findings(spark, config: dict, checkpoint: str, runs: list[dict], record_range: list[int],
                         new_rows, group_events, end_time_ms: int | None, cached: list | None = None):
    """``(findings, provisional, next_state)`` of the offset rules over this run's commits and timeline rows,
    resumed from the last published run's state (``audit.offsets_incremental``); ``None`` when the checkpoint's
    earlier runs kept no offset-rule state."""
    from pyspark.sql import functions as F

    from offsets_audit.audit.offsets_incremental import incremental_offset_findings
    from offsets_audit.audit.offsets_spark import TIMELINE_DDL

    state = _offset_state(spark, checkpoint, runs)
    if state is None:
        return None
    timeline = new_rows.filter(F.col("kind").isin("context", "ownership")).select(
        "group_id", "kind", F.from_json("payload", TIMELINE_DDL).alias("t")).select("group_id", "kind", "t.*")
    group_times = group_events.filter(F.col("group_id").isNotNull()).select("group_id", "partition", "offset",
                                                                             "timestamp")
    run_log = replay_incremental.commit_log_rows(spark, checkpoint, record_range)
    return incremental_offset_findings(run_log, group_times, timeline, state, rule_settings(config), config,
                                       end_time_ms, cached=cached)


def _write_offset_state(checkpoint: str, run_id: str, state: dict) -> None:
    for name, df in state.items():
        df.write.mode("overwrite").parquet(f"{checkpoint}/{OFFSET_STATE_FOLDER}/run={run_id}/{name}")


# -- which micro-batches a run covers ------------------------------------------------------------------------

def _published(checkpoint: str, run_id: str) -> tuple[list[dict], dict]:
    """The published runs before this one, and where this run starts (first fold / records batch, clock)."""
    runs = replay_incremental.read_json(replay_incremental.local_folder(checkpoint) / RUNS_FILE, [])
    if runs and runs[-1]["run_id"] == run_id:
        runs = runs[:-1]  # a rerun of the last run: it covers that run's batches again and replaces its tables
    elif any(r["run_id"] == run_id for r in runs):
        raise UserError(f"run id {run_id} was published before run {runs[-1]['run_id']} of checkpoint {checkpoint}",
                        fix="pass a new --run-id (only the last incremental run can be rerun)")
    last = runs[-1] if runs else None
    start = {"fold": last["fold"][1] + 1 if last else 0, "records": last["records"][1] + 1 if last else 0,
             "clock": last.get("clock") if last else None}
    return runs, start


# -- the run ---------------------------------------------------------------------------------------------------

@frees_its_plans
def run_incremental(spark, config: dict, checkpoint: str, *, progress: bool = True) -> dict:
    """Replay and audit what is new since the last run; write this run's tables; return its summary."""
    from pyspark.sql import functions as F

    from offsets_audit import sinks
    from offsets_audit.audit.gaps import mark_data_gaps
    from offsets_audit.codec import spark as codec_spark
    from offsets_audit.group_configs import with_group_configs
    from offsets_audit.sources.options import source_config

    config = with_group_configs(config)
    out = config["output"]
    run_id = config["run_id"]
    output = sinks.Output.of(out)
    output.check()
    replay_incremental.check_locations(config, checkpoint)
    root = replay_incremental.local_folder(checkpoint)
    root.mkdir(parents=True, exist_ok=True)
    runs, start = _published(checkpoint, run_id)
    spark.streams  # noqa: B018 - creates the state store coordinator transformWithStateInPandas needs
    timings: dict[str, float] = {}

    def stage(name, work):
        began = time.perf_counter()
        if progress:
            print(f"[offsets-audit] {name} ...", file=sys.stderr, flush=True)
        result = work()
        timings[name] = round(time.perf_counter() - began, 3)
        return result

    source = source_config(config)
    # Neither query writes decoded rows (the fold reads the bytes, the records query the typed commit values and
    # the quarantine rows, which never have JSON texts): the codec builds none (``json_text=False``).
    ran_fold = stage("fold+audit", lambda: replay_incremental.run_fold_query(
        spark, codec_spark.decode(replay_incremental.read_stream(spark, source), json_text=False), checkpoint,
        GroupAuditStep(config)))
    ran_records = stage("offsets", lambda: replay_incremental.run_records_query(
        spark, codec_spark.decode(replay_incremental.read_stream(spark, source), json_text=False), checkpoint))

    all_fold = replay_incremental.fold_batches(checkpoint)
    all_records = replay_incremental.counted_batches(checkpoint)
    fold_range = [b for b in all_fold if b >= start["fold"]]
    record_range = [b for b in all_records if b >= start["records"]]
    counts = replay_incremental.record_counts(checkpoint, record_range)
    clock = counts.pop("clock")
    if start["clock"] is not None:
        clock = start["clock"] if clock is None else max(clock, start["clock"])

    # What later runs read of the past: the last published run's chain of compact snapshots plus this run's
    # micro-batches (a checkpoint whose last run wrote none: every micro-batch so far).
    chain = replay_incremental.snapshot_chain(runs)
    history = replay_incremental.history_rows(spark, checkpoint, chain, fold_range, all_fold)
    tail_settings = _tail_settings(config)
    carry_tail = bool(chain) and runs[-1].get("tail_settings") == tail_settings
    nothing_new = not fold_range and not record_range
    how: dict = {}
    # Everything the run persists, freed when it ends, failed or not: a long-lived session (a nightly driver
    # running several checkpoints, a notebook, the tests) must not keep a run's caches, whose plans are large.
    cached: list = []
    try:
        def tables_of_run():
            planning = time.perf_counter()
            replayed, quarantine = replay_incremental.replay_tables(spark, checkpoint, fold_range, history, record_range)
            frames = {**replayed.as_dict(outputs_only=True), "quarantine": quarantine}
            new_rows = replay_incremental.fold_rows(spark, checkpoint, fold_range)
            tail, how["provisional"], due = provisional_tail(
                history, new_rows if fold_range else None, config, clock, carry_tail)
            tail = tail.persist()
            cached.append(tail)
            began = time.perf_counter()
            tail.count()  # the provisional pass (Python per recomputed group), timed on its own
            timings["audit:provisional_pass"] = round(time.perf_counter() - began, 3)
            gaps = replay_incremental.gaps_so_far(spark, checkpoint, chain, record_range, all_records).persist()
            cached.append(gaps)
            reruns = assignor_audit(spark, config, checkpoint, runs, fold_range, history, frames["offsets"])
            audited, provisional_audited, rerun_state, resumed = reruns if reruns is not None else (None,) * 4
            if resumed is not None:
                cached.append(resumed)
            findings = _findings(new_rows)
            provisional = _findings(tail)
            offset_rules = offset_rule_findings(spark, config, checkpoint, runs, record_range, new_rows,
                                                frames["group_events"], clock, cached)
            offset_state = None
            if offset_rules is not None:
                completed, still_open, offset_state = offset_rules
                for name, found in (("findings", completed), ("provisional", still_open)):
                    if found is None:
                        continue
                    found = found.withColumn("time", F.timestamp_millis(F.col("time")))
                    if name == "findings":
                        findings = findings.unionByName(found)
                    else:
                        provisional = provisional.unionByName(found)
            mismatches = assignor_mismatches(audited, config)
            if mismatches is not None:
                findings = findings.unionByName(mismatches.withColumn("time", F.timestamp_millis(F.col("time"))))
            mismatches = assignor_mismatches(provisional_audited, config)
            if mismatches is not None:
                provisional = provisional.unionByName(mismatches.withColumn("time", F.timestamp_millis(F.col("time"))))
            findings = mark_data_gaps(findings, gaps, config)
            provisional = mark_data_gaps(provisional, gaps, config)
            rebalances = _rebalances(new_rows)
            open_rebalances = _rebalances(tail)
            of_run = rebalances.unionByName(open_rebalances)
            # A few days: the store is read by day folder, so a run reads the rebalances of its own days only.
            days = sorted(r["day"] for r in of_run.select("day").distinct().collect() if r["day"] is not None)
            earlier = replay_incremental.stored_rebalances(spark, checkpoint, [r["run_id"] for r in runs], days)
            cumulative = (_rebalances(earlier.unionByName(history)).unionByName(open_rebalances)
                          .filter(F.col("day").isin(*days)))
            frames.update(findings=findings, rebalances=rebalances, provisional_findings=provisional,
                          provisional_rebalances=open_rebalances, latency_summary=latency_summary(of_run),
                          rebalance_causes=rebalance_causes(of_run), latency_daily=latency_summary(cumulative),
                          assignor_audit=audited, provisional_assignor_audit=provisional_audited)
            frames = {name: (None if df is None else df.persist()) for name, df in frames.items()}
            cached.extend(df for df in frames.values() if df is not None)
            # Building the plans (and the few small jobs that read the checkpoint's state while doing so).
            timings["audit:plan"] = round(time.perf_counter() - planning - timings["audit:provisional_pass"], 3)
            # A stage boundary: the audit stage's time is the work it did. Each table's figure is its count's wall
            # time beside the others' (the first to read a shared intermediate pays for it).
            counted = side_by_side({name: df.count for name, df in frames.items() if df is not None})
            timings.update({f"audit:{name}": round(seconds, 3) for name, (_, seconds) in counted.items()})
            if rerun_state is not None:
                rerun_state = rerun_state.persist()
                cached.append(rerun_state)
                rerun_state.count()
                resumed.unpersist()
            return frames, tail, gaps, offset_state, rerun_state, due

        frames, tail, gaps, offset_state, rerun_state, due = stage("audit", tables_of_run)
        # A delta snapshot when the tails of untouched groups were carried and the chain is short, else a full one;
        # always a full one after a snapshot written before chains (it may hold completed rebalances, which this
        # run stores and the next must not read again).
        delta = (due is not None and 0 < len(chain) <= replay_incremental.DELTAS_BEFORE_FULL
                 and "chain" in runs[-1])
        next_chain = chain + [run_id] if delta else [run_id]
        paths = stage("write", lambda: output.write_run(spark, run_id, frames, timings=timings))
        summary: dict = {
            "run_id": run_id, "mode": "incremental", "checkpoint": checkpoint,
            "batches": {"fold": ran_fold, "records": ran_records,
                        "covered": {"fold": fold_range, "records": record_range}},
            "records": counts, "clock": clock, "timings_s": timings, "tables": paths,
            "skipped_rules": [] if offset_state is not None else list(OFFSET_RULES),
            "stages": {"replay": "ran", "audit": "ran (group rules, rebalances)",
                       "offset_rules": "ran" if offset_state is not None else
                       ("skipped: this checkpoint's earlier runs kept no offset-rule state (start a new checkpoint to "
                        "audit offsets incrementally): " + ", ".join(OFFSET_RULES)),
                       "assignor_audit": "ran" if config["assignors"]["audit"] else "skipped: assignors.audit is off",
                       "provisional": how["provisional"],
                       "history": (f"compact snapshot of run {chain[-1]}"
                                   + (f" (delta {len(chain) - 1} on the full snapshot of run {chain[0]})"
                                      if len(chain) > 1 else "")
                                   + f" + {len(fold_range)} new fold micro-batch(es)" if chain else
                                   f"{len(all_fold)} fold micro-batch(es) (no compact snapshot yet)"),
                       "snapshot": (f"delta on run {chain[-1]}: the touched groups and the tails recomputed"
                                    if delta else "full: every group")},
        }
        if nothing_new:
            summary["stages"]["replay"] = "skipped: nothing new since the last run"
        summary.update(run_figures(frames))
        if out.get("html_report"):
            from offsets_audit.sinks.report import write_report
            summary["report"] = write_report(spark, output, run_id, summary)
        summary["summary_path"] = sinks.write_text_file(spark, out["path"], f"summary/{run_id}.json",
                                                        json.dumps(summary, indent=2, default=str))
        if offset_state is not None:
            stage("offset state", lambda: _write_offset_state(checkpoint, run_id, offset_state))
        if rerun_state is not None:
            stage("assignor state", lambda: rerun_state.write.mode("overwrite").parquet(
                f"{checkpoint}/{ASSIGNOR_STATE_FOLDER}/run={run_id}"))
        # The compact snapshot the next run reads instead of this run's and earlier micro-batches, and the
        # rebalances this run completed (written before publishing: a run killed before that leaves folders the
        # next published run removes).
        def compact():
            keep_targets = rerun_state is None
            if delta:
                rows = replay_incremental.compact_rows(replay_incremental.fold_rows(spark, checkpoint, fold_range),
                                                       tail.join(due, "group_id", "left_semi"), keep_targets,
                                                       len(runs), due)
                new_gaps = replay_incremental.new_gaps(spark, checkpoint, record_range)
            else:
                rows, new_gaps = replay_incremental.compact_rows(history, tail, keep_targets, len(runs)), gaps
            replay_incremental.write_compact(spark, checkpoint, run_id, rows, new_gaps)
            replay_incremental.write_rebalances(checkpoint, run_id, history)

        stage("compact", compact)
        runs.append({"run_id": run_id, "fold": [start["fold"], max(all_fold, default=start["fold"] - 1)],
                     "records": [start["records"], max(all_records, default=start["records"] - 1)], "clock": clock,
                     "offset_rules": offset_state is not None, "assignor_state": rerun_state is not None,
                     "compact": True, "chain": next_chain, "tail_settings": tail_settings})
        replay_incremental.write_json(root / RUNS_FILE, runs)
        _drop_unneeded(checkpoint, runs, start["records"], start["fold"])
        return summary
    finally:
        release_run(df.unpersist for df in cached)


def _drop_unneeded(checkpoint: str, runs: list[dict], first_records_batch: int,
                   first_fold_batch: int | None = None) -> None:
    """After publishing: remove what no later run reads. A rerun of the run just published covers its batches
    again from the state of the run before it; a new run covers newer batches from this run's state. So the
    commit log's micro-batches before this run's first, the offset-rule / assignor states of runs before the
    previous one, and the compact snapshots in neither chain of the last two runs, go; once the run has a
    compact snapshot, so do the fold rows, quarantine rows and counts of the micro-batches before its first; and
    the stored rebalances of runs never published (a crash half-way leaves folders the next run removes)."""
    import re
    import shutil

    replay_incremental.drop_commit_log_before(checkpoint, first_records_batch)
    if first_fold_batch is not None and runs and runs[-1].get("compact"):
        replay_incremental.drop_batches_before(checkpoint, first_fold_batch, first_records_batch)
    last_two = {f"run={r['run_id']}" for r in runs[-2:]}
    published = {f"run={r['run_id']}" for r in runs}
    chains = {f"run={r}" for n in (len(runs), len(runs) - 1) for r in replay_incremental.snapshot_chain(runs[:n])}
    for folder, keep in ((OFFSET_STATE_FOLDER, last_two), (ASSIGNOR_STATE_FOLDER, last_two),
                         (replay_incremental.COMPACT_FOLDER, chains), (replay_incremental.REBALANCE_STORE, published)):
        root = replay_incremental.local_folder(checkpoint) / folder
        if root.is_dir():
            for child in root.iterdir():
                if re.fullmatch(r"run=.+", child.name) and child.name not in keep:
                    shutil.rmtree(child, ignore_errors=True)


def read_runs(spark, output, fmt: str = "parquet") -> dict:
    """Every published run's tables as one DataFrame per table (``run_id`` column kept), for readers that want the
    history: the union of ``findings`` over runs plus the last run's ``provisional_findings`` is what one batch run
    over the whole log reports. ``output`` is a ``sinks.Output`` (tables by name or under a path) or a path."""
    from offsets_audit import sinks

    where = output if isinstance(output, sinks.Output) else sinks.Output(path=output, format=fmt)
    out: dict = {}
    for manifest in where.complete_runs(spark):
        for table in manifest.get("tables") or {}:
            df = where.read_table(spark, table, manifest["run_id"])
            if df is None:
                continue
            from pyspark.sql import functions as F

            df = df.withColumn("run_id", F.lit(manifest["run_id"]))
            out[table] = df if table not in out else out[table].unionByName(df, allowMissingColumns=True)
    return out


def print_summary(summary: dict, file=None) -> None:
    """The run's summary lines; a stage that did not run says "skipped", never a count."""
    from offsets_audit.sinks.summary import latency_quartet, print_groups_and_quarantine, print_rule_counts

    file = file or sys.stdout
    r = summary["records"]
    covered = summary["batches"]["covered"]
    print(f"run {summary['run_id']} (incremental, {len(covered['records'])} new micro-batch(es)): read "
          f"{r['read']:,} records = {r['decoded']:,} decoded + {r['quarantined']:,} quarantined; "
          f"{r.get('records_lost', 0):,} records lost in {r.get('unreadable', 0):,} unreadable stretches", file=file)
    print_groups_and_quarantine(summary, file)
    print_rule_counts("findings (completed by this run's records)", summary.get("findings"), file)
    print_rule_counts("provisional findings (open at the end of the log; the next run replaces them)",
                      summary.get("provisional_findings"), file)
    for stage, state in summary["stages"].items():
        if state.startswith("skipped"):
            print(f"{stage}: {state}", file=file)
    for row in summary.get("latency") or []:
        print(f"  latency {row.get('group_type') or '?':<10} rebalances {row.get('rebalances', 0)}: to-assignment "
              f"{latency_quartet(row, 'time_to_assignment_ms')}, convergence {latency_quartet(row, 'convergence_ms')} ms", file=file)
    print("timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in summary["timings_s"].items() if ":" not in k),
          file=file)
    if summary.get("report"):
        print(f"report: {summary['report']}", file=file)
