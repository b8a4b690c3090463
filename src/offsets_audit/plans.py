"""Logical plans kept small: helpers every stage may use (they import no stage)."""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

#: Shuffle partitions per core of a stage whose work per group is uneven, on a local session (``by_group``).
GROUP_TASKS_PER_CORE = 4


def master_cores(master: str) -> int | None:
    """The cores a local master runs tasks on (``local`` 1, ``local[N]`` and ``local[N,F]`` N, ``local[*]`` this
    machine's); None for any other master (a cluster's)."""
    if master == "local":
        return 1
    found = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master)
    if found is None:
        return None
    return (os.cpu_count() or 1) if found.group(1) == "*" else int(found.group(1))


def session_cores(spark) -> int | None:
    """``master_cores`` of ``spark``'s master: the cores of a local session, None for any other (a cluster's, or a
    session that does not show its master, as a restricted Spark Connect one)."""
    try:
        master = spark.conf.get("spark.master", "") or ""
    except Exception:  # a session that does not show its master (a restricted Spark Connect one): not a local one
        master = ""
    return master_cores(master)


def by_group(df, key: str = "group_id"):
    """``df`` hash-partitioned by ``key`` for a stage whose work per group is uneven: those that run Python per
    group (``groupBy(key).applyIn...``: the fold, the walk, the assignor re-runs) and the commit log's windows
    (``replay.commit_log``), in ``GROUP_TASKS_PER_CORE`` tasks per core on a local session.

    A local session has one shuffle partition per core (``spark_session.local_conf``), so such a stage ran one task
    per core, each with the groups their hashes gave it (Spark's Murmur3 of the group ids), and the stage lasted as
    long as the larger one, the other core idle for the difference. Four tasks per core, taken by whichever core is
    free, even that out. Off a local master the session's own shuffle
    partitions (a cluster's are many) partition ``df`` as before."""
    spark = df.sparkSession
    cores = session_cores(spark)
    if cores is None:
        return df.repartition(key)
    per_core = spark.conf.get(_GROUP_TASKS, None)
    return df.repartition((int(per_core) if per_core else GROUP_TASKS_PER_CORE) * cores, key)


def cached_leaf(df):
    """``df``, which must be persisted, as a DataFrame whose logical plan is a leaf holding its rows, not the
    lineage that computed it.

    Every DataFrame operation analyses the whole logical plan again on the driver. The audit builds a few
    hundred operations over the replay's tables, and each of those tables carries the read, the decode and the
    replay's windows in its plan: building the audit's plans over them took several times the driver time they
    take over leaves.

    On a classic session the leaf is the cache itself (Spark's ``InMemoryRelation``): it still holds the cache's
    physical plan, so blocks lost with an executor are recomputed from the lineage as before; unpersisting ``df``
    (the caller keeps that duty) frees the leaf's data too. On Spark Connect, where the client holds an unresolved
    plan that it sends whole with every analysis, schema, persist or action, the leaf is a local checkpoint the
    server keeps (``spark_api.checkpointed``): computed by the first action that reads it, from ``df``'s cache, and
    not recomputed if an executor holding its blocks is lost (the query then fails and the run must be started
    again)."""
    from offsets_audit.spark_api import cached_relation, checkpointed, is_connect

    if is_connect(df.sparkSession):
        return checkpointed(df) if is_persisted(df) else df
    if not df.is_cached:
        return df
    leaf = cached_relation(df)
    if leaf is None:
        return df  # not served whole from the cache: plan over the lineage
    leaf.is_cached = True  # its data is df's cache: persisting it again would cache a second copy
    return leaf


def is_persisted(df) -> bool:
    """Whether ``df``'s rows are kept by the session: persisted, or a leaf of ``cached_leaf`` (which must not be
    persisted again: that would keep a second copy). On Spark Connect each ``is_cached`` is a round trip in which
    the server analyses ``df``'s whole plan, so a leaf answers from its mark."""
    from offsets_audit.spark_api import KEPT

    # the instance's own attributes: a Spark Connect DataFrame answers any other name with a column
    return bool(vars(df).get(KEPT, False)) or bool(df.is_cached)


def cast_to(df, schema, extra=()):
    """``df`` with exactly ``schema``'s columns (a ``StructType``), in order and cast to its types, a missing
    one as nulls, then the columns named in ``extra`` as they are.

    One ``selectExpr`` of SQL casts: the same ``Cast`` expressions as ``Column.cast``, parsed by the JVM in one
    call, where building them column by column took four Py4J round trips per column."""
    present = set(df.columns)
    columns = [f"CAST({quoted(f.name) if f.name in present else 'NULL'} AS {sql_type(f.dataType)}) AS {quoted(f.name)}"
               for f in schema.fields]
    return df.selectExpr(*columns, *[quoted(c) for c in extra])


def quoted(name: str) -> str:
    """``name`` as a SQL identifier: in backticks, a backtick in it doubled."""
    return "`" + name.replace("`", "``") + "`"


def sql_type(data_type) -> str:
    """A Spark ``DataType`` as SQL type text that parses back to the same type; nested field names are quoted
    (``simpleString`` leaves them bare, which breaks on a keyword or a name with a dot or a colon)."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        return "struct<" + ",".join(f"{quoted(f.name)}:{sql_type(f.dataType)}" for f in data_type.fields) + ">"
    if isinstance(data_type, T.ArrayType):
        return f"array<{sql_type(data_type.elementType)}>"
    if isinstance(data_type, T.MapType):
        return f"map<{sql_type(data_type.keyType)},{sql_type(data_type.valueType)}>"
    return data_type.simpleString()


def materialize(frames, *, latest=None):
    """Compute every DataFrame of ``frames`` (each persisted by the caller) into its cache, all in one Spark action;
    with ``latest`` (a DataFrame of one numeric column), return that column's greatest value, taken in the same action
    (None without rows or without ``latest``).

    One count per DataFrame was one query each: planned, optimised and scheduled on its own, for a stage's five or
    six tables and intermediates, with the cores idle between them on a small input. An aggregate over their union
    reads each one's cache once (building it where it is not built yet: a cache is built whole whatever a query reads
    of it), and Spark runs the union's independent branches side by side within the one job; an intermediate several
    of them read (persisted too) is computed once, by the first branch to reach it."""
    from functools import reduce

    from pyspark.sql import functions as F

    parts = [df.select(F.lit(None).cast("long").alias("_v")) for df in frames if df is not None]
    if latest is not None:
        parts.append(latest.select(F.col(latest.columns[0]).cast("long").alias("_v")))
    if not parts:
        return None
    return reduce(lambda a, b: a.union(b), parts).agg(F.count(F.lit(1)), F.max("_v")).first()[1]


#: Below this many decoded records a run on a local session plans its later stages without adaptive execution
#: (``plain_execution_for_a_small_log``).
ADAPTIVE_MIN_RECORDS = 2_000_000
#: Below this many decoded records a run on a local session also plans its per-group stages (``by_group``) in one
#: task per core (``plain_execution_for_a_small_log``).
SPREAD_MIN_RECORDS = 500_000

_ADAPTIVE = "spark.sql.adaptive.enabled"
#: The session setting ``by_group`` reads its tasks per core from while a small log's stages are planned.
_GROUP_TASKS = "offsets_audit.group_tasks_per_core"


def plain_execution_for_a_small_log(spark, records: int, conf: Mapping[str, Any]):
    """On a local session reading fewer than ``ADAPTIVE_MIN_RECORDS`` records, adaptive query execution turned off
    for what the run plans from now on (the replay, the assignor re-runs, the audit, the writes); returns a function
    that gives the session its setting back, or None when nothing was changed.

    A stage's tables come from one action over a plan of many exchanges (``materialize``). Adaptive execution runs
    each exchange as a Spark job of its own and optimises the rest of the plan again after each one: driver work per
    exchange, which a small log pays in full and which is most of the audit stage's time there. What it adapts buys
    nothing on a small local run: the shuffles already have one partition per core, the stages whose work per group
    is uneven ask for their own partition count (``by_group``), and the joins that must broadcast say so. A large log
    keeps it (partitions coalesced, skew handled), as does a cluster's session and one whose ``spark.conf`` sets it.
    Persisted frames are planned when persisted: the setting must change before the stages plan them, not around
    their action.

    Below ``SPREAD_MIN_RECORDS`` the per-group stages (``by_group``) run one task per core instead of
    ``GROUP_TASKS_PER_CORE``: their work is a fraction of a second, while each task costs the executor the
    deserialisation of the stage's task binary, and every later stage reading their cached output ran as many
    tasks again."""
    if records >= ADAPTIVE_MIN_RECORDS or _ADAPTIVE in conf or session_cores(spark) is None:
        return None
    restores = []
    before = spark.conf.get(_ADAPTIVE, "true")
    if str(before).lower() != "false":
        spark.conf.set(_ADAPTIVE, "false")
        restores.append(lambda: spark.conf.set(_ADAPTIVE, before))
    if records < SPREAD_MIN_RECORDS and spark.conf.get(_GROUP_TASKS, None) is None:
        spark.conf.set(_GROUP_TASKS, "1")
        restores.append(lambda: spark.conf.unset(_GROUP_TASKS))
    if not restores:
        return None

    def restore() -> None:
        for undo in restores:
            undo()

    return restore


#: Spark jobs ``side_by_side`` runs at once.
SIDE_BY_SIDE = 3


def side_by_side(work: dict, workers: int = SIDE_BY_SIDE) -> dict:
    """``{name: (result, seconds)}`` of ``{name: callable}``, a few at once, each in its own driver thread.

    A stage ends with many small Spark jobs (a count per table, a write per table); each waits on scheduling,
    Python workers and file commits with cores idle, so a few at once keep them busy. Every callable has run
    (or failed) when this returns; the first failure, in ``work``'s order, is raised. The seconds are each
    one's wall time, taken beside the others."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    def timed(fn):
        began = time.perf_counter()
        result = fn()
        return result, time.perf_counter() - began

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="offsets-audit") as pool:
        futures = {name: pool.submit(timed, fn) for name, fn in work.items()}
    return {name: future.result() for name, future in futures.items()}
