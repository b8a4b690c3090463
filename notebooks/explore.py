# Databricks notebook source
# MAGIC %md
# MAGIC # Explore one audit run
# MAGIC
# MAGIC Reads the tables `offsets_audit.job.run_job` wrote, by name (`<catalog>.<schema>.<table>`, the job's
# MAGIC `output.catalog`) or under a folder (`<output>/<table>`), picks one group (by default the group with the
# MAGIC most findings) and shows:
# MAGIC
# MAGIC 1. its epoch timeline: group epoch bumps, target assignment epochs with their `AssignmentTimestamp`s,
# MAGIC    and every member's epoch converging on the assignment epoch (KIP-848 / KIP-1071 / KIP-1263);
# MAGIC 2. its rebalance latency: time to assignment and reconciliation per group-epoch bump;
# MAGIC 3. its findings, with the `__consumer_offsets` records (`partition:offset`) that prove them;
# MAGIC 4. its recorded target assignments next to a re-run of the group's assignor.
# MAGIC
# MAGIC Runs on Databricks (widgets at the top), in Jupyter (`notebooks/explore.ipynb`, same cells) and as a
# MAGIC plain script: `python notebooks/explore.py` after `offsets-audit demo` (reads `demo-out/tables`).
# MAGIC Locally the parameters come from the environment: `OFFSETS_AUDIT_CATALOG` (`<catalog>.<schema>`; when
# MAGIC set the tables are read by name), else `OFFSETS_AUDIT_TABLES` and `OFFSETS_AUDIT_FORMAT` (`parquet` or
# MAGIC `delta`); `OFFSETS_AUDIT_RUN_ID`, `OFFSETS_AUDIT_GROUP_ID`, and `OFFSETS_AUDIT_PLOTS` (a folder to save
# MAGIC the figures as PNG files).

# COMMAND ----------

import os

DEFAULTS = {
    "tables_catalog": os.environ.get("OFFSETS_AUDIT_CATALOG", ""),
    "tables_path": os.environ.get("OFFSETS_AUDIT_TABLES", "demo-out/tables"),
    "table_format": os.environ.get("OFFSETS_AUDIT_FORMAT", "parquet"),
    "run_id": os.environ.get("OFFSETS_AUDIT_RUN_ID", ""),
    "group_id": os.environ.get("OFFSETS_AUDIT_GROUP_ID", ""),
}

try:
    dbutils  # noqa: F821 -- defined on Databricks only
except NameError:
    params = dict(DEFAULTS)
else:
    dbutils.widgets.text("tables_catalog", DEFAULTS["tables_catalog"], "Tables catalog.schema (or a path below)")  # noqa: F821
    dbutils.widgets.text("tables_path", DEFAULTS["tables_path"], "Tables path")  # noqa: F821
    dbutils.widgets.dropdown("table_format", DEFAULTS["table_format"], ["parquet", "delta"], "Format")  # noqa: F821
    dbutils.widgets.text("run_id", DEFAULTS["run_id"], "Run id (empty: latest)")  # noqa: F821
    dbutils.widgets.text("group_id", DEFAULTS["group_id"], "Group id (empty: most findings)")  # noqa: F821
    params = {name: dbutils.widgets.get(name) for name in DEFAULTS}  # noqa: F821

CATALOG = params["tables_catalog"].strip()
TABLES = params["tables_path"].strip().rstrip("/")
TABLE_FORMAT = params["table_format"].strip() or "parquet"
RUN_ID = params["run_id"].strip()
GROUP_ID = params["group_id"].strip()
PLOTS_DIR = os.environ.get("OFFSETS_AUDIT_PLOTS", "")


# COMMAND ----------

# MAGIC %md
# MAGIC ## Loading the tables
# MAGIC
# MAGIC Spark's reader does the work: `parquet`, or `delta` (built into Databricks; locally without the Delta
# MAGIC jars the table's current files are listed with the `deltalake` package and read as Parquet), always
# MAGIC with the table's own schema from `offsets_audit.tables`, so a table a run wrote empty reads as empty.
# MAGIC Only one group's rows reach the driver as pandas.

# COMMAND ----------

import json

import matplotlib.pyplot as plt
import pandas as pd
from pyspark.sql import functions as F

from offsets_audit import tables as audit_tables
from offsets_audit.sinks import Output

try:
    spark  # noqa: F821 -- Databricks (classic, serverless, shared clusters) and pyspark shells provide it
except NameError:
    from offsets_audit.spark_session import get_spark

    # A Spark Connect session when SPARK_REMOTE is set (sc://host:port, or local[2]), else a local one. The tables
    # by name of a local run live in the metastore `offsets-audit run` keeps (Spark's defaults).
    spark = get_spark("offsets-audit-explore", master=os.environ.get("OFFSETS_AUDIT_MASTER", "local[2]"),
                      extra_conf={"spark.sql.catalogImplementation": "hive"} if CATALOG else None)

try:
    get_ipython  # noqa: F821 -- Jupyter and Databricks notebooks
    IN_NOTEBOOK = True
except NameError:
    IN_NOTEBOOK = False
if PLOTS_DIR:
    os.makedirs(PLOTS_DIR, exist_ok=True)

OUTPUT = Output(path=TABLES, format=TABLE_FORMAT, catalog=CATALOG)
print(f"tables: {OUTPUT}")


def load(name, group_id=None):
    """This run's rows of one table as pandas, optionally only one group's.

    Read with the table's own schema (``offsets_audit.tables``), so a table the run wrote empty reads as
    an empty frame with its columns; None only when the table is not there at all."""
    df = OUTPUT.read_table(spark, name, RUN_ID)
    if df is None:
        print(f"table {name} not found in {OUTPUT}")
        return empty_frame(name)
    if group_id is not None:
        df = df.filter(F.col("group_id") == group_id)
    return df.toPandas()


def empty_frame(name):
    return pd.DataFrame(columns=audit_tables.schema(name).fieldNames())


def show_table(frame, title=""):
    """display() in notebooks, a plain text table in a script."""
    if IN_NOTEBOOK:
        if title:
            print(title)
        display(frame)  # noqa: F821 -- IPython and Databricks builtin
    else:
        print(f"\n{title}\n{frame.to_string(index=False) if len(frame) else '(no rows)'}")


def show_plot(fig, name):
    """Shows a figure inline; also saves it as <OFFSETS_AUDIT_PLOTS>/<name>.png when that is set."""
    fig.tight_layout()
    if PLOTS_DIR:
        fig.savefig(os.path.join(PLOTS_DIR, f"{name}.png"), dpi=90)
    if IN_NOTEBOOK:
        plt.show()
    else:
        plt.close(fig)


# A run is complete when its manifest exists (a row of <catalog>.<schema>.runs, or <tables>/_runs/<run_id>.json):
# written after every table.
complete = [m["run_id"] for m in OUTPUT.complete_runs(spark)]
if not RUN_ID:
    if not complete:
        raise SystemExit(f"no complete run in {OUTPUT}: run `offsets-audit demo`, or point tables_catalog or "
                         "tables_path at the job's tables")
    RUN_ID = complete[-1]
elif RUN_ID not in complete:
    print(f"warning: run {RUN_ID} is not complete (killed or failed while writing): rerun it with the same run id")
print(f"run id: {RUN_ID}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Groups of the run and the group to explore
# MAGIC
# MAGIC Every group's final state with its number of findings. The group explored below is the `group_id`
# MAGIC parameter, or else the group with the most findings (ties: the most rebalances, then the name).

# COMMAND ----------

groups = load("group_state")
findings_all = load("findings")
rebalances_all = load("rebalances")
finding_counts = findings_all.groupby("group_id").size().rename("findings") if len(findings_all) else pd.Series(
    dtype="int64", name="findings")
rebalance_counts = rebalances_all.groupby("group_id").size().rename("rebalances") if len(rebalances_all) else \
    pd.Series(dtype="int64", name="rebalances")
overview = (groups[["group_id", "group_type", "state", "group_epoch", "assignment_epoch", "generation", "num_members"]]
            .set_index("group_id").join(finding_counts).join(rebalance_counts)
            .fillna({"findings": 0, "rebalances": 0}).astype({"findings": "int64", "rebalances": "int64"})
            .reset_index().sort_values(["findings", "rebalances", "group_id"], ascending=[False, False, True]))
show_table(overview, f"{len(overview)} groups in run {RUN_ID}")
quarantine = OUTPUT.read_table(spark, "quarantine", RUN_ID)
quarantined = 0 if quarantine is None else quarantine.count()
if not len(findings_all) and not quarantined:
    print(f"run {RUN_ID} is clean: no findings (every enabled rule passed), nothing quarantined, "
          + (f"{len(rebalances_all)} rebalances" if len(rebalances_all) else "no rebalances"))
else:
    print(f"run {RUN_ID}: {len(findings_all)} findings, {len(rebalances_all)} rebalances, "
          f"{quarantined} quarantined records")

if not GROUP_ID:
    GROUP_ID = overview["group_id"].iloc[0]
GROUP_TYPE = groups.loc[groups["group_id"] == GROUP_ID, "group_type"].iloc[0]
print(f"exploring group {GROUP_ID} ({GROUP_TYPE})")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Epoch timeline
# MAGIC
# MAGIC From the replay's `group_events`: the group epoch after each bump, the target assignment epoch when its
# MAGIC record was written (dots) and when it says it was computed (`AssignmentTimestamp`, crosses; with
# MAGIC KIP-1263 batching these may trail the bump by the assignment interval), and each member's epoch, which
# MAGIC should climb to the assignment epoch as the member reconciles. Classic groups show their generation.

# COMMAND ----------

events = load("group_events", GROUP_ID).sort_values(["timestamp", "partition", "offset"], kind="stable")
events["info"] = events["details"].map(lambda text: json.loads(text) if text else {})
start_ms = events["timestamp"].min()
end_s = (events["timestamp"].max() - start_ms) / 1000


def seconds(ms):
    return (ms - start_ms) / 1000


def of_kind(event):
    return events[events["event"] == event]


def draw_epochs(ax, legend):
    bumps = of_kind("group_epoch_bumped")
    if len(bumps):
        y = [info["new"] for info in bumps["info"]]
        ax.step(list(seconds(bumps["timestamp"])) + [end_s], y + y[-1:], where="post", color="black", linewidth=2,
                label="group epoch")
    computed = of_kind("target_assignment_computed")
    if len(computed):
        epochs = [info["assignment_epoch"] for info in computed["info"]]
        ax.step(list(seconds(computed["timestamp"])) + [end_s], epochs + epochs[-1:], where="post",
                color="tab:blue", linewidth=1.5, label="assignment epoch (record time)")
        ax.plot(seconds(computed["timestamp"]), epochs, "o", color="tab:blue")
        stamped = [(seconds(info["assignment_timestamp"]), info["assignment_epoch"])
                   for info in computed["info"] if info.get("assignment_timestamp")]
        if stamped:
            ax.plot(*zip(*stamped), "x", color="tab:red", markersize=9, label="AssignmentTimestamp")
    advanced = of_kind("member_epoch_advanced")
    for i, (member_id, rows) in enumerate(advanced.groupby("member_id", sort=False)):
        ax.step(seconds(rows["timestamp"]), [info["member_epoch"] for info in rows["info"]], where="post",
                linewidth=1, alpha=0.8, linestyle="--", label=f"member {member_id[:8]}" if i < 8 else None)
    generations = of_kind("classic_generation_changed")
    if len(generations):
        y = [info["generation"] for info in generations["info"]]
        ax.step(list(seconds(generations["timestamp"])) + [end_s], y + y[-1:], where="post", color="tab:purple",
                label="classic generation")
    ax.set_ylabel("epoch")
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", fontsize="small")


# The whole history on top; below, a zoom on the slowest rebalance, where members converge.
rebalances = load("rebalances", GROUP_ID).sort_values(["bump_time", "group_epoch"])
slowest = rebalances.sort_values("convergence_ms", ascending=False).head(1)
fig, axes = plt.subplots(2 if len(slowest) else 1, 1, figsize=(11, 8 if len(slowest) else 4.5), squeeze=False)
whole = axes[0][0]
draw_epochs(whole, legend=True)
whole.set_title(f"{GROUP_ID} ({GROUP_TYPE}): epochs")
whole.set_xlabel(f"seconds since {pd.to_datetime(start_ms, unit='ms'):%Y-%m-%d %H:%M:%S} UTC")
if len(slowest):
    zoom = axes[1][0]
    draw_epochs(zoom, legend=False)
    row = slowest.iloc[0]
    finished = row["converged_time"] if pd.notna(row["converged_time"]) else events["timestamp"].max()
    zoom.set_xlim(seconds(row["bump_time"]) - 1, seconds(finished) + 1)
    zoom.set_title(f"slowest rebalance: to group epoch {row['group_epoch']}, converged in {row['convergence_ms']} ms")
    zoom.set_xlabel("seconds")
show_plot(fig, "epoch_timeline")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Rebalance latency
# MAGIC
# MAGIC One row of `rebalances` per group-epoch bump: `assigning_ms` until the target assignment
# MAGIC (timed by its `AssignmentTimestamp`), then `reconciling_ms` until every member is stable at the new
# MAGIC epoch. Hatched bars did not converge before the log ended (or the group was deleted or converted).

# COMMAND ----------

if len(rebalances):
    fig, (bars, spread) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [2, 1]})
    labels = rebalances["group_epoch"].astype(str)
    hatch = ["//" if not complete else "" for complete in rebalances["complete"]]
    assigning = rebalances["assigning_ms"].fillna(0)
    reconciling = rebalances["reconciling_ms"].fillna(0)
    bars.bar(labels, assigning, color="tab:orange", hatch=hatch, label="assigning (to target assignment)")
    bars.bar(labels, reconciling, bottom=assigning, color="tab:green", hatch=hatch, label="reconciling")
    bars.set_xlabel("group epoch")
    bars.set_ylabel("ms")
    bars.set_title("latency per rebalance")
    bars.legend(fontsize="small")
    measured = [rebalances[c].dropna() for c in ("time_to_assignment_ms", "convergence_ms")]
    spread.boxplot(measured, showfliers=True)
    spread.set_xticks([1, 2], ["to assignment", "convergence"])
    spread.set_title("distribution (ms)")
    show_plot(fig, "rebalance_latency")
    show_table(rebalances[["group_epoch", "bump_time", "time_to_assignment_ms", "convergence_ms", "members",
                           "members_changed", "partitions_moved", "bumps_in_batch", "complete"]], "rebalances")
    latency = load("latency_summary")
    show_table(latency[(latency["group_id"] == GROUP_ID) | ((latency["level"] == "group_type")
                                                           & (latency["group_type"] == GROUP_TYPE))],
               "latency percentiles: this group per day, and its group type over the run")
else:
    print(f"{GROUP_ID} has no group-epoch bumps (classic groups have generations, not epochs)")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Why did it rebalance?
# MAGIC
# MAGIC Every group-epoch bump with its `causes` (the vocabulary is in `docs/rules.md`, "Rebalance causes")
# MAGIC and its `cause_members`: who joined, left, was replaced or changed its subscription, named by client id
# MAGIC and host. `rebalance_causes` ranks the clients behind the most rebalances across the whole cluster.

# COMMAND ----------


def culprits_of(members):
    """``client_id@client_host (member id prefix)`` of each cause member of one rebalance."""
    return ", ".join(f"{m['client_id'] or '?'}@{m['client_host'] or '?'} ({(m['member_id'] or '')[:8]})"
                     for m in (members if members is not None else []))


if len(rebalances) and "causes" in rebalances.columns:
    why = rebalances.sort_values(["bump_time", "group_epoch"]).assign(
        causes=lambda d: d["causes"].map(lambda c: ", ".join(c) if c is not None else ""),
        culprits=lambda d: d["cause_members"].map(culprits_of))
    show_table(why[["group_epoch", "bump_time", "causes", "culprits"]], f"why {GROUP_ID} rebalanced")
    counts = why["causes"].str.split(", ").explode().value_counts()
    fig, ax = plt.subplots(figsize=(9, 3))
    ax.barh(counts.index[::-1], counts.values[::-1], color="tab:red")
    ax.set_xlabel("group-epoch bumps")
    ax.set_title(f"causes of {GROUP_ID}'s rebalances")
    show_plot(fig, "rebalance_causes")
    cluster = load("rebalance_causes")
    if len(cluster):
        top = cluster[cluster["level"] == "client_day"].sort_values("rebalances", ascending=False).head(10)
        show_table(top[["day", "client_id", "client_host", "rebalances", "groups"]],
                   "clients behind the most rebalances, whole cluster")
else:
    print(f"{GROUP_ID} has no group-epoch bumps to explain")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Findings
# MAGIC
# MAGIC Rule ids and thresholds are described in `docs/rules.md`; evidence is `partition:offset` of the
# MAGIC `__consumer_offsets` records, ready for `offsets-audit decode` or a segment dump.

# COMMAND ----------

findings = findings_all[findings_all["group_id"] == GROUP_ID].sort_values(["time", "rule"])
findings = findings.assign(evidence=findings["evidence"].map(lambda records: ", ".join(records)))
if len(findings):
    show_table(findings[["time", "severity", "rule", "message", "evidence"]], f"{len(findings)} findings of {GROUP_ID}")
else:
    print(f"0 findings of {GROUP_ID}: every enabled rule passed for this group")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Recorded vs re-run assignments
# MAGIC
# MAGIC Each recorded target assignment against the group's assignor run on the replayed inputs
# MAGIC (`assignor_audit`): whether they match, how many partitions (tasks, for streams: active tasks) would
# MAGIC move, and per member how many it holds in the recording and in the re-run.

# COMMAND ----------


def member_counts(target_json):
    """Partitions per member of a recorded target (streams: active tasks), as the assignor audit counts them."""
    counts = {}
    for member_id, assignment in json.loads(target_json or "{}").items():
        if GROUP_TYPE == "streams":
            assignment = (assignment or {}).get("active") or {}
        counts[member_id] = sum(len(partitions or ()) for partitions in (assignment or {}).values())
    return counts


audit = load("assignor_audit", GROUP_ID).sort_values(["assignment_epoch", "offset"])
if len(audit):
    show_table(audit[["assignment_epoch", "kind", "assignor", "confidence", "match", "moved_partitions",
                      "recorded_spread", "result_spread", "num_members", "error"]], "assignor re-runs")
    targets = load("target_assignments", GROUP_ID).set_index(["partition", "offset"])
    per_member = []
    for row in audit[audit["kind"] == "rerun"].itertuples():
        recorded = member_counts(targets.loc[(row.partition, row.offset), "target"])
        diff = json.loads(row.member_count_diff or "{}")
        for member_id in sorted(set(recorded) | set(diff)):
            per_member.append({"assignment_epoch": row.assignment_epoch, "member_id": member_id,
                               "recorded": recorded.get(member_id, 0),
                               "rerun": recorded.get(member_id, 0) + diff.get(member_id, 0), "match": row.match})
    per_member = pd.DataFrame(per_member)
    show_table(per_member, "per-member counts, recorded vs re-run")
    if len(per_member):
        mismatched = per_member.loc[~per_member["match"], "assignment_epoch"]
        epoch = mismatched.iloc[0] if len(mismatched) else per_member["assignment_epoch"].max()
        shown = per_member[per_member["assignment_epoch"] == epoch]
        fig, ax = plt.subplots(figsize=(9, 3.5))
        positions = range(len(shown))
        ax.bar([p - 0.2 for p in positions], shown["recorded"], width=0.4, label="recorded")
        ax.bar([p + 0.2 for p in positions], shown["rerun"], width=0.4, label="re-run")
        ax.set_xticks(list(positions), [m[:8] for m in shown["member_id"]])
        ax.set_ylabel("active tasks" if GROUP_TYPE == "streams" else "partitions")
        moved = audit.loc[(audit["kind"] == "rerun") & (audit["assignment_epoch"] == epoch), "moved_partitions"]
        ax.set_title(f"assignment epoch {epoch}: "
                     + (f"re-run differs, {moved.iloc[0]} moved" if len(mismatched) else "re-run matches"))
        ax.legend(fontsize="small")
        show_plot(fig, "assignor_member_counts")
else:
    print(f"no assignor re-runs for {GROUP_ID} (classic groups, or assignors.audit is off)")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Coordinator load and assignment intervals
# MAGIC
# MAGIC The group's `__consumer_offsets` partition is one coordinator thread: while a server-side assignor runs
# MAGIC there, every other group of the partition waits. `coordinator_load` estimates that time per minute (the
# MAGIC job's re-run of each assignment converted to Kafka's time), `assignment_interval_whatif` what another
# MAGIC `assignment.interval.ms` would change for this group (KIP-1263's rule replayed over its bumps), with the
# MAGIC recommended interval marked. `docs/assignment-intervals.md` says how to read them.

# COMMAND ----------

partition = groups.loc[groups["group_id"] == GROUP_ID, "partition"].iloc[0]
minutes = load("coordinator_load")
minutes = minutes[minutes["partition"] == partition].sort_values("estimated_ms", ascending=False)
if len(minutes):
    minutes = minutes.assign(top_groups=minutes["top_groups"].map(
        lambda top: ", ".join(f"{g['group_id']} {g['share'] or 0:.0%}" for g in top) if top is not None else ""))
    show_table(minutes.head(10)[["minute_start_time", "assignor_runs", "estimated_ms", "estimated_ms_low",
                                 "estimated_ms_high", "share_of_minute", "max_run_ms", "top_groups"]],
               f"busiest minutes of __consumer_offsets-{partition} (assignor time, ms)")
else:
    print(f"no assignor ran on __consumer_offsets-{partition} in this run")
whatif = load("assignment_interval_whatif", GROUP_ID).sort_values("interval_ms")
if len(whatif):
    show_table(whatif[["interval_ms", "candidate", "runs", "recorded_runs", "peak_minute_share",
                       "time_to_assignment_p50_ms", "time_to_assignment_p95_ms", "time_to_assignment_max_ms",
                       "replay_matches_log", "meets_budget", "within_latency", "recommended"]],
               f"{GROUP_ID}: what each assignment interval would have done")
    fig, ax = plt.subplots(figsize=(9, 3.5))
    labels = [f"{ms / 1000:g} s" for ms in whatif["interval_ms"]]
    ax.bar(labels, whatif["runs"], color=["tab:red" if r else "tab:blue" for r in whatif["recommended"]])
    ax.set_ylabel("assignor runs")
    ax2 = ax.twinx()
    ax2.plot(labels, whatif["time_to_assignment_p95_ms"] / 1000, "k.-", label="p95 time to assignment (s)")
    ax2.set_ylabel("p95 to assignment (s)")
    ax.set_title(f"{GROUP_ID}: runs per interval (recommended in red)")
    ax2.legend(fontsize="small")
    show_plot(fig, "assignment_interval_whatif")
else:
    print(f"no what-if for {GROUP_ID} (a classic or commit-only group, or no group-epoch bump in this run)")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Next
# MAGIC
# MAGIC The run's summary is `<output>/summary/<run_id>.json` and its self-contained HTML report
# MAGIC `<output>/report/<run_id>.html`. Set `group_id` above to explore another group.
