"""The local session the job builds (``spark_session.get_spark``): the JVM options it starts the driver with."""


def test_the_local_driver_runs_the_parallel_collector_with_our_log_config(spark):
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    assert "-XX:+UseParallelGC" in options.split()
    assert any(o.startswith("-Dlog4j2.configurationFile=") for o in options.split())
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = {beans.get(i).getName() for i in range(beans.size())}
    assert names == {"PS Scavenge", "PS MarkSweep"}
