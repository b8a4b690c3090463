"""What the stages ask of their SparkSession, asked so that a classic session and a Spark Connect one both answer.

A Spark Connect session (``SPARK_REMOTE``, ``--remote sc://...``: Databricks serverless compute and shared
clusters) has no SparkContext and no JVM gateway on the client; everything it does goes through the DataFrame
and SQL APIs, which a classic session has too. Where a classic session's JVM gives a cheaper or a richer answer
(its default parallelism, the Hadoop FileSystem with the session's own credentials, the status store the
progress lines read, the cached plan of a persisted frame), it is asked here and nowhere else, and each function
says what a Connect session does instead. Every other module asks this one.
"""

from __future__ import annotations

import threading

#: How Spark names a data source it cannot find (Spark 4's error class, then the older wording).
_NOT_FOUND = ("DATA_SOURCE_NOT_FOUND", "Failed to find data source")

#: Set on a DataFrame whose rows the session keeps without a cache of its own (``checkpointed``).
KEPT = "_offsets_audit_kept"

_checkpoints: dict[str, list[str]] = {}
_checkpoints_lock = threading.Lock()

_refusals: dict[tuple[int, str, str], str | None] = {}
_refusals_lock = threading.Lock()


def is_connect(spark) -> bool:
    """True for a Spark Connect session (``pyspark.sql.connect``): no SparkContext, no JVM on this side."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def spark_context(spark):
    """The classic session's ``SparkContext``; None on Spark Connect."""
    if is_connect(spark):
        return None
    try:
        return spark.sparkContext
    except Exception:  # a session without one (a restricted or stopped one): treated as Connect
        return None


def jvm(spark):
    """The classic session's Py4J view of its driver JVM; None on Spark Connect."""
    context = spark_context(spark)
    return None if context is None else context._jvm


def quiet_driver_logs(spark) -> None:
    """Only errors from the driver's log4j, on a session this process started (a classic one, or the local
    Connect server's); a remote Connect server's logs are its operator's to set."""
    context = spark_context(spark)
    if context is not None:
        context.setLogLevel("ERROR")


def default_parallelism(spark) -> int:
    """The tasks one wave of the session's cores runs (``SparkContext.defaultParallelism``).

    Spark Connect does not expose it: there it is ``spark.default.parallelism`` when set (sessions built by
    ``spark_session`` set it), else the partitions of ``range`` without a partition count, which Spark sizes by
    the same default (``leafNodeDefaultParallelism``): one small query."""
    context = spark_context(spark)
    if context is not None:
        return max(1, int(context.defaultParallelism))
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return max(1, int(configured))
    row = spark.sql("SELECT count(DISTINCT spark_partition_id()) AS n FROM range(0, 1048576)").first()
    return max(1, int(row["n"]))


def read_refusal(spark, name: str, path: str | None = None) -> str | None:
    """Spark's refusal (the text of its error) to analyse a read of the data source ``name``, of ``path`` when
    given; None when it analyses. Asked once per session, source and path, the same way on a classic and a Connect
    session (analysis is where a Connect session shows a missing source or table)."""
    key = (id(spark), name.lower(), path or "")
    with _refusals_lock:
        if key in _refusals:
            return _refusals[key]
    reader = spark.read.format(name)
    try:
        (reader.load(path) if path else reader.load()).schema  # noqa: B018 - analysis only, nothing is read
        refusal = None
    except Exception as error:  # noqa: BLE001 - the refusal is the answer
        refusal = str(error) or type(error).__name__
    with _refusals_lock:
        _refusals[key] = refusal
    return refusal


def has_data_source(spark, name: str) -> bool:
    """Whether ``spark`` can resolve the data source ``name`` (``kafka``, ``delta``): its jars are on the classpath
    (Databricks, ``--packages``, ``spark.jars``) or it is registered. A read without options is analysed: a present
    source refuses it for its missing options, a missing one for its name."""
    refusal = read_refusal(spark, name)
    return refusal is None or not any(marker in refusal for marker in _NOT_FOUND)


def hadoop_file_system(spark, path: str):
    """``(file_system, Path)``: the Hadoop ``FileSystem`` of ``path`` with the classic session's configuration (its
    credentials for ``s3a://``, ``abfss://``, ``dbfs:/``...) and the JVM's ``Path`` class; None on Spark Connect,
    where ``sinks.files`` uses a Python file system library on the same path."""
    gateway = jvm(spark)
    if gateway is None:
        return None
    path_class = gateway.org.apache.hadoop.fs.Path
    conf = spark_context(spark)._jsc.hadoopConfiguration()
    return path_class(path).getFileSystem(conf), path_class


def read_hadoop_text(spark, stream) -> str:
    """The UTF-8 text of an open Hadoop input stream (classic sessions only: ``hadoop_file_system``)."""
    gateway = jvm(spark)
    reader = gateway.java.io.BufferedReader(gateway.java.io.InputStreamReader(stream, "UTF-8"))
    lines = []
    line = reader.readLine()
    while line is not None:
        lines.append(line)
        line = reader.readLine()
    return "\n".join(lines)


def status_store(spark):
    """The classic session's ``(statusTracker, AppStatusStore)`` (the Spark UI's numbers, kept with the UI off);
    None on Spark Connect, whose client gets each operation's stages from ``registerProgressHandler`` instead."""
    context = spark_context(spark)
    if context is None:
        return None
    return context.statusTracker(), context._jsc.sc().statusStore()


def cached_relation(df):
    """A DataFrame whose logical plan is ``df``'s cache alone (Spark's ``InMemoryRelation``), or None when that
    cannot be had: ``df`` is not served whole from its cache, the Spark has no classic ``Dataset`` class (before
    4.0), or the session is Spark Connect, whose client holds an unresolved plan that the server analyses with
    its cache lookup (so a Connect run plans over the lineage)."""
    if is_connect(df.sparkSession):
        return None
    from py4j.protocol import Py4JError
    from pyspark.sql import DataFrame

    spark = df.sparkSession
    try:
        plan = df._jdf.queryExecution().withCachedData()
        if plan.getClass().getSimpleName() != "InMemoryRelation":
            return None
        return DataFrame(jvm(spark).org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, plan), spark)
    except (Py4JError, TypeError):  # py4j: a missing class is a JavaPackage, which is not callable
        return None


def checkpointed(df):
    """On Spark Connect: ``df`` as a leaf the server keeps (``DataFrame.localCheckpoint``, which Spark Connect
    returns as a ``CachedRemoteRelation``: a plan of one id), marked as kept (``plans.is_persisted``).

    Lazy: the checkpoint is computed by the first action that reads it, with ``df``'s cache, so a stage's tables are
    still computed in one action (``plans.materialize``). Unlike a cache, a local checkpoint's blocks are not
    recomputed from the lineage when an executor holding them is lost.

    PySpark releases a checkpoint when Python collects its plan object, with a call that can leave the client
    waiting for good (seen on a local Connect server, at the collection that ends a run); that release is turned
    off here and the leaf is released by ``release_checkpoints`` when the run ends (a leaf made outside a run
    lives as long as the session)."""
    leaf = df.localCheckpoint(eager=False)
    plan = leaf._plan
    plan._spark_session = None  # PySpark's release on collection (``CachedRemoteRelation.__del__``) does nothing
    with _checkpoints_lock:
        _checkpoints.setdefault(_session_key(df.sparkSession), []).append(plan._relation_id)
    setattr(leaf, KEPT, True)
    return leaf


def release_checkpoints(spark) -> None:
    """Release on the server every leaf ``checkpointed`` made on ``spark`` (Spark Connect's
    ``RemoveCachedRemoteRelationCommand``, sent as any other command); nothing on a classic session. A leaf the
    server no longer knows (a server restarted, a session gone) is nothing to release."""
    if spark is None or not is_connect(spark):
        return
    with _checkpoints_lock:
        relation_ids = _checkpoints.pop(_session_key(spark), [])
    if not relation_ids:
        return
    from pyspark.sql.connect.proto import Command

    for relation_id in relation_ids:
        command = Command()
        command.remove_cached_remote_relation_command.relation.relation_id = relation_id
        try:
            spark.client.execute_command(command)
        except Exception:  # noqa: BLE001 - already gone with its session: nothing left to free
            pass


def _session_key(spark) -> str:
    return str(getattr(spark, "session_id", id(spark)))


def collect_jvm_garbage() -> None:
    """One full collection of the driver JVM this Python process runs, if it runs one (a classic session, or the
    local server of ``SPARK_REMOTE=local[N]``), so that Spark's cleaner sees the broadcasts and shuffles a run
    dropped now. A remote Connect server collects on its own schedule: nothing to do from here."""
    try:
        from pyspark import SparkContext
    except ImportError:  # pyspark-client: a Connect client without the JVM side
        return
    context = SparkContext._active_spark_context
    if context is not None and context._jvm is not None:
        context._jvm.System.gc()
