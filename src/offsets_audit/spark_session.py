"""One way to get a SparkSession, shared by the CLI, the jobs and the tests.

On a cluster (spark-submit, Databricks) the active session is reused untouched. Locally we build one
with the project's Python as ``PYSPARK_PYTHON`` so workers import the same environment, and register the
package's Python Data Sources (``kafka-segments``, ``kafka-python``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from importlib import resources
from pathlib import Path

from offsets_audit.plans import master_cores
from offsets_audit.spark_api import collect_jvm_garbage, quiet_driver_logs, release_checkpoints


#: Generated classes a local session keeps compiled (``spark.sql.codegen.cache.maxEntries``): a few runs' worth.
CODEGEN_CACHE_ENTRIES = 1000

#: Packages whose code runs while the driver plans a query (Catalyst's trees, analyser, optimiser, logical and
#: physical plans and rules; Janino compiling generated code; ANTLR, the SQL parser's runtime), not in the tasks. A
#: run of the job plans a few hundred queries; with the usual thresholds HotSpot's C2 compiler spends much CPU on
#: these packages beside the tasks, for code each query runs only briefly. Their methods reach C2 only after
#: ``PLANNING_COMPILE_SCALING``
#: times the usual counts; the tasks' code (generated classes, operators, Arrow, Parquet, the shuffle) keeps the usual
#: thresholds.
PLANNING_PACKAGES = (
    "org.apache.spark.sql.catalyst.trees", "org.apache.spark.sql.catalyst.analysis",
    "org.apache.spark.sql.catalyst.optimizer", "org.apache.spark.sql.catalyst.plans",
    "org.apache.spark.sql.catalyst.rules", "org.codehaus.janino", "org.codehaus.commons", "org.antlr",
)
#: Large enough that planning code rarely reaches C2 in one run; a larger factor with more packages gained nothing.
PLANNING_COMPILE_SCALING = 30.0


def planning_compile_options() -> str:
    """HotSpot options (``-XX:CompileCommand``, quiet: nothing printed at start) that raise the compile thresholds of
    ``PLANNING_PACKAGES``' methods by ``PLANNING_COMPILE_SCALING``."""
    return " ".join(["-XX:CompileCommand=quiet", *(
        f"-XX:CompileCommand=CompileThresholdScaling,{package}.*::*,{PLANNING_COMPILE_SCALING}"
        for package in PLANNING_PACKAGES)])


#: Shuffle partitions of a session on a master ``master_cores`` does not know.
SHUFFLE_PARTITIONS = 4


def local_conf(master: str = "local[2]", shuffle_partitions: int | None = None) -> dict[str, str]:
    return {
        "spark.master": master,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # One shuffle partition per core (``master_cores``): every shuffle's tasks run in one wave, as many Python
        # workers as there are cores. The stages whose work per group is uneven (the fold, the walk, the assignor
        # re-runs, the commit log's windows) ask for four tasks per core themselves (``plans.by_group``).
        # More partitions than cores only add tasks' fixed cost on a local session.
        "spark.sql.shuffle.partitions": str(shuffle_partitions or master_cores(master) or SHUFFLE_PARTITIONS),
        "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.driver.memory": "4g",
        # The throughput collector: on a local session the driver JVM is the executor too, and on 2 cores G1's
        # concurrent marking and refinement threads take CPU from the tasks. A cluster's executors keep their own
        # settings.
        # And the driver's planning code compiled by C2 later (``PLANNING_PACKAGES``): HotSpot's compiler threads
        # warming up are the largest single cost of a run on 2 cores.
        "spark.driver.extraJavaOptions": "-XX:+UseParallelGC " + planning_compile_options(),
        # The decoded log's cache without column compression: the job's first stage builds it over every record, and
        # the compression statistics cost a large share of that caching, and scans are as fast without them.
        # Local sessions only: a cluster's memory is its owner's to
        # trade (``spark.conf`` in the config).
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # Generated code is compiled (Janino) and cached per code text, 100 entries by default; one run of the job
        # makes a few hundred distinct ones, so a second run in the same JVM (a notebook, the tests) compiled them
        # all again, and HotSpot then compiled the new classes again. With room for them a second run reuses them;
        # a first run is unchanged.
        # Static: it applies to sessions this function builds; a cluster's is set in its Spark config.
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        # Output tables are partitioned by run_id; keep it a string when reading them back
        # (Spark would otherwise turn a date-like run id into a DATE column).
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        "spark.python.worker.reuse": "true",
        # The status store keeps every job, stage and SQL execution of a session (1,000 of each by default),
        # plans and metrics included, even with the UI off: a notebook or test session runs thousands.
        "spark.ui.retainedJobs": "100",
        "spark.ui.retainedStages": "100",
        "spark.ui.retainedTasks": "10000",
        "spark.sql.ui.retainedExecutions": "50",
        # Tungsten's memory page. A broadcast hash relation read by a task takes one whole page however few its rows,
        # and on a local session that copy sits in the driver's own block store (the executor is the driver) until
        # the context cleaner drops it after a full GC. The default page grows with the driver's memory, so a run's
        # many small broadcasts held far more heap than their rows, and a session running the job again and again
        # (a notebook, the tests) ran out of memory building the next broadcast. Small pages bound that; sorts and
        # aggregations just take more of them.
        "spark.buffer.pageSize": "2m",
    }


def get_spark(app_name: str = "offsets-audit", master: str | None = None, extra_conf: dict | None = None, *,
              input_bytes: int | None = None):
    """Return the active SparkSession, or build one when none is running: a Spark Connect session when
    ``SPARK_REMOTE`` is set (PySpark's own convention, which ``--remote`` follows; ``connect_session``), else a
    local classic one on ``master``. ``input_bytes``: what the run will read, when the caller knows it
    (``sources.preflight``); a local classic session started for a small input compiles with C1 only
    (``C1_ONLY_MAX_INPUT_BYTES``)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        register_data_sources(active)
        return active
    remote = os.environ.get("SPARK_REMOTE", "").strip()
    if remote:
        spark = connect_session(remote, app_name, extra_conf)
        register_data_sources(spark)
        return spark
    if launched_by_spark():
        # spark-submit already started the JVM with its --master, --name and --conf: add only spark.conf.
        builder = SparkSession.builder
        for key, value in (extra_conf or {}).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        register_data_sources(spark)
        return spark
    master = master or os.environ.get("OFFSETS_AUDIT_MASTER", "local[2]")
    _local_environment(master)
    builder = SparkSession.builder.appName(app_name)
    for key, value in _local_session_conf(master, extra_conf, input_bytes).items():
        builder = builder.config(key, value)
    with _stderr_without(WORKER_NOISE):  # the JVM started here inherits the filtered stderr
        spark = builder.getOrCreate()
    quiet_driver_logs(spark)
    register_data_sources(spark)
    return spark


#: What PySpark's stateful-streaming driver worker (``pyspark.sql.streaming.transform_with_state_driver_worker``)
#: prints unconditionally, several lines per micro-batch of every incremental run, and the JVM copies to its stderr:
#: noise between the run's own lines. A JVM this process starts gets a stderr without them.
WORKER_NOISE = ("Starting Streaming TransformWithStateInPandas Python worker",
                "Streaming TransformWithStateInPandas Python worker")


@contextlib.contextmanager
def _stderr_without(prefixes: tuple[str, ...]):
    """While the block runs, file descriptor 2 is a pipe whose lines are copied to the real stderr, but for lines
    starting with ``prefixes`` (and the blank line each is followed by): a child process started in the block (the
    JVM) keeps writing through it for its whole life; this process's own stderr is restored after the block."""
    import threading

    try:
        real = os.dup(2)
        read_end, write_end = os.pipe()
    except OSError:
        yield
        return
    sys.stderr.flush()
    os.dup2(write_end, 2)
    os.close(write_end)

    def copy() -> None:
        dropped = False
        with os.fdopen(read_end, "rb") as lines:
            for line in lines:
                text = line.decode("utf-8", errors="replace")
                if text.startswith(prefixes):
                    dropped = True
                    continue
                if dropped and not text.strip():
                    dropped = False
                    continue
                dropped = False
                try:
                    os.write(real, line)
                except OSError:
                    return

    threading.Thread(target=copy, name="jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)  # ``real`` stays open: the copy writes to it


def _local_environment(master: str) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # a local session serves loopback only


#: A local session started for an input of at most this many bytes (``get_spark``'s ``input_bytes``) compiles with
#: HotSpot's C1 only (``-XX:TieredStopAtLevel=1``): such a run is planning and the first runs of Spark's own code,
#: which C2 compiles at a cost in CPU the run never earns back on 2 cores. A larger input keeps C2 for the loops it
#: makes hot (C1 only for every run was tried and not kept: docs/performance.md).
C1_ONLY_MAX_INPUT_BYTES = 8 * 1024 * 1024


def _local_session_conf(master: str, extra_conf: dict | None, input_bytes: int | None = None) -> dict[str, str]:
    conf = local_conf(master)
    log_config = resources.files("offsets_audit") / "log4j2.properties"
    if isinstance(log_config, Path) and log_config.is_file():
        conf["spark.driver.extraJavaOptions"] += f" -Dlog4j2.configurationFile={log_config}"
    if input_bytes is not None and input_bytes <= C1_ONLY_MAX_INPUT_BYTES:
        conf["spark.driver.extraJavaOptions"] += " -XX:TieredStopAtLevel=1"
    conf.update({key: str(value) for key, value in (extra_conf or {}).items()})
    if "delta-spark" in conf.get("spark.jars", "") + conf.get("spark.jars.packages", ""):
        # Delta's Spark writer needs its extension and catalog, as configure_spark_with_delta_pip's users set them
        from offsets_audit.sinks.delta import DELTA_SESSION_CONF

        for key, value in DELTA_SESSION_CONF.items():
            conf.setdefault(key, value)
    return conf


def connect_session(remote: str, app_name: str = "offsets-audit", extra_conf: dict | None = None):
    """A Spark Connect session on ``remote``: ``sc://host:port/;token=...`` (Databricks serverless and shared
    clusters, a ``start-connect-server.sh``), or ``local[N]`` for a Connect server this process starts on a
    local master (``local_connect_server``). ``extra_conf`` (the config's ``spark.conf``) is set on the session
    where the server lets a client set it (runtime SQL settings); a local server takes all of it at start."""
    from offsets_audit.errors import UserError

    if not remote.startswith(("local", "sc://")):
        raise UserError(f"Spark Connect address {remote!r} is neither sc://host:port nor local[N]",
                        fix="pass --remote sc://host:15002 (or set SPARK_REMOTE), or local[2] for a local server")
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession  # checks the client's packages
    except ImportError as error:
        raise UserError(f"Spark Connect needs PySpark's connect client: {error}".splitlines()[0],
                        fix="pip install 'consumer-offsets-audit[connect]' (or 'pyspark[connect]')") from None
    if remote.startswith("local"):
        port = local_connect_server(remote, app_name, extra_conf)
        remote = f"sc://localhost:{port}"
        # Later sessions of this process (another thread's) and the processes it starts (a notebook kernel, a
        # command) reach this server, not a second one.
        os.environ["SPARK_REMOTE"] = remote

    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"  # pyspark.sql's functions now build Connect columns
    builder = ConnectSession.builder.remote(remote)
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, str(value))
    return builder.getOrCreate()


#: Set on a local Connect server by PySpark's own ``remote("local")`` too.
_CONNECT_SERVER_CONF = {
    "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
    "spark.sql.artifact.isolation.enabled": "true",
    "spark.sql.artifact.isolation.alwaysApplyClassloader": "true",
}


def local_connect_server(master: str, app_name: str = "offsets-audit", extra_conf: dict | None = None) -> int:
    """Start a Spark Connect server in this process's driver JVM on ``master`` (``local[N]``), with the settings of
    a local classic session (``local_conf``) and ``extra_conf``, serving loopback only; returns its port.

    This is what PySpark's ``SparkSession.builder.remote("local[N]")`` does, but on a free port rather than
    the fixed 15002: two runs on one machine (two clusters' nightly audits, a test beside a notebook) would
    otherwise meet on the same port. The server requires the token PySpark's local mode uses
    (``SPARK_CONNECT_AUTHENTICATE_TOKEN``, made here when unset), which its client reads from the environment;
    stopping the client's session stops the server (``SPARK_LOCAL_REMOTE``), as in PySpark's local mode."""
    import secrets
    import socket

    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    _local_environment(master)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    os.environ.setdefault("SPARK_CONNECT_AUTHENTICATE_TOKEN", secrets.token_hex(16))
    conf = {**_local_session_conf(master, extra_conf), **_CONNECT_SERVER_CONF,
            "spark.app.name": app_name, "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port)}
    remote = os.environ.pop("SPARK_REMOTE", None)  # spark-submit refuses to start a JVM with a remote set
    try:
        server = SparkSession(SparkContext.getOrCreate(SparkConf().setAll(list(conf.items()))))
    finally:
        if remote is not None:
            os.environ["SPARK_REMOTE"] = remote
    quiet_driver_logs(server)
    os.environ["SPARK_LOCAL_REMOTE"] = "1"
    return port


def release_run(releases) -> None:
    """Call each release of a run's caches (``DataFrame.unpersist``, ``StageTables.release``)."""
    for release in releases:
        release()


def frees_its_plans(run):
    """Decorate a run so that Python's cyclic garbage is collected once it returns (or fails).

    A run's DataFrames end in reference cycles (closures, stage tables) that only Python's cyclic collector
    frees, and until it does their JVM side stays reachable through Py4J: the plans and the broadcast relations
    their joins built, gigabytes of driver heap after one incremental run on a small history. Python's collector
    does not run often enough on its own: in a long-lived session (a notebook, a nightly driver auditing
    several clusters, the tests) a few runs' leftovers fill a 4 GB driver. Collected after the run's frame is
    gone, not inside it, where its locals still hold them; then one JVM collection, so that Spark's cleaner
    sees the dropped broadcasts and removes their blocks now rather than when the heap is already full."""
    import functools
    import gc

    @functools.wraps(run)
    def wrapper(*args, **kwargs):
        try:
            return run(*args, **kwargs)
        finally:
            release_checkpoints(args[0] if args else kwargs.get("spark"))
            gc.collect()
            collect_jvm_garbage()
    return wrapper


def launched_by_spark() -> bool:
    """True when this Python process was started by a Spark JVM (spark-submit, the pyspark shell), whose
    settings (master, deploy mode, memory) must not be replaced by the local defaults."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def register_data_sources(spark) -> None:
    """Register the package's Python Data Sources once per session."""
    from offsets_audit.codec.source import register as register_codec_sources
    from offsets_audit.sources import register

    register(spark)
    register_codec_sources(spark)
