"""The local session the job builds (``spark_session.get_spark``): the JVM options it starts the driver with."""

import pytest


def test_the_local_driver_runs_the_parallel_collector_with_our_log_config(spark):
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    assert "-XX:+UseParallelGC" in options.split()
    assert any(o.startswith("-Dlog4j2.configurationFile=") for o in options.split())
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = {beans.get(i).getName() for i in range(beans.size())}
    assert names == {"PS Scavenge", "PS MarkSweep"}


def test_the_local_driver_compiles_its_planning_code_later_and_hotspot_reads_every_option(spark):
    import os
    import shutil
    import subprocess

    from offsets_audit.spark_session import PLANNING_COMPILE_SCALING, PLANNING_PACKAGES, planning_compile_options

    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions").split()
    assert options[options.index("-XX:CompileCommand=quiet"):][:1 + len(PLANNING_PACKAGES)] == \
        planning_compile_options().split()
    arguments = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    assert set(planning_compile_options().split()) <= {arguments.get(i) for i in range(arguments.size())}
    # Unquieted, HotSpot echoes each command it parsed (a malformed one is an error line instead).
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else shutil.which("java")
    loud = [o for o in planning_compile_options().split() if o != "-XX:CompileCommand=quiet"]
    done = subprocess.run([java, *loud, "-version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    echoed = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("CompileCommand:")]
    assert echoed == [f"CompileCommand: CompileThresholdScaling {p.replace('.', '/')}/*.* double "
                      f"CompileThresholdScaling = {PLANNING_COMPILE_SCALING:.6f}" for p in PLANNING_PACKAGES]


def test_a_local_session_has_a_shuffle_partition_per_core():
    import os

    from offsets_audit.spark_session import SHUFFLE_PARTITIONS, local_conf, master_cores

    assert [master_cores(m) for m in ("local", "local[2]", "local[3,2]", "local[*]", "spark://127.0.0.1:7077")] == \
        [1, 2, 3, os.cpu_count(), None]
    assert local_conf("local[2]")["spark.sql.shuffle.partitions"] == "2"
    assert local_conf("local[*]")["spark.sql.shuffle.partitions"] == str(os.cpu_count())
    assert local_conf("spark://127.0.0.1:7077")["spark.sql.shuffle.partitions"] == str(SHUFFLE_PARTITIONS)
    assert local_conf("local[2]", shuffle_partitions=8)["spark.sql.shuffle.partitions"] == "8"


@pytest.mark.spark
def test_the_python_group_stages_run_four_tasks_per_core(spark):
    """The fold, the walk and the assignor re-runs partition their groups into ``GROUP_TASKS_PER_CORE`` tasks per core
    of a local session (``plans.by_group``), each group whole in one of them."""
    from pyspark.sql import functions as F

    from offsets_audit.plans import GROUP_TASKS_PER_CORE, by_group, master_cores

    cores = master_cores(spark.conf.get("spark.master"))
    parted = by_group(spark.range(1000).select(F.format_string("g-%d", F.col("id") % 37).alias("group_id")))
    assert parted.rdd.getNumPartitions() == GROUP_TASKS_PER_CORE * cores
    placed = parted.select("group_id", F.spark_partition_id().alias("task")).distinct()
    assert placed.count() == 37 == placed.select("group_id").distinct().count()


def test_a_session_for_a_small_input_compiles_with_c1_only():
    """A local session started for an input of at most ``C1_ONLY_MAX_INPUT_BYTES`` (what ``sources.preflight``
    measured) stops at C1; a larger or unknown input keeps C2; the config's own JVM options replace ours."""
    from offsets_audit.spark_session import C1_ONLY_MAX_INPUT_BYTES, _local_session_conf

    def options(input_bytes, extra=None):
        return _local_session_conf("local[2]", extra, input_bytes)["spark.driver.extraJavaOptions"].split()

    assert "-XX:TieredStopAtLevel=1" in options(0)
    assert "-XX:TieredStopAtLevel=1" in options(C1_ONLY_MAX_INPUT_BYTES)
    assert "-XX:TieredStopAtLevel=1" not in options(C1_ONLY_MAX_INPUT_BYTES + 1)
    assert "-XX:TieredStopAtLevel=1" not in options(None)
    assert "-XX:+UseParallelGC" in options(0) and "-XX:CompileCommand=quiet" in options(0)
    assert options(0, {"spark.driver.extraJavaOptions": "-Xss4m"}) == ["-Xss4m"]
