"""Shared fixtures: one local SparkSession for the whole run, and the golden data directory."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]
from golden_files import GOLDEN  # noqa: E402  (tests/golden/, vendored)
from kafka_broker import kafka_broker, kafka_broker_factory  # noqa: E402, F401  (fixtures: a real Kafka broker)
from real_kafka import real_kafka_run  # noqa: E402, F401  (fixture: the session's run of the scenarios on it)
from kafka_matrix import pytest_runtest_logreport, pytest_sessionfinish, pytest_sessionstart  # noqa: E402, F401  (the matrix's lines)


def pytest_addoption(parser):
    parser.addoption("--kafka-versions", default=None, metavar="V[,V...]|all",
                     help="Kafka versions the real-broker tests run on (default: the newest; all: the version matrix)")

# In CI the fuzzing is derandomised, so a red build is reproducible and never a new random draw; locally
# every run explores new inputs.
def pytest_collection_modifyitems(config, items):
    """Tests marked ``full`` are long runs of what shorter tests already cover (whole command sets on Spark
    Connect, long incremental sequences): ``make test-full`` (``OFFSETS_AUDIT_FULL=1``) runs them, the default
    suite leaves them out so CI's run stays within its budget on two cores."""
    if os.environ.get("OFFSETS_AUDIT_FULL") == "1":
        return
    skip = pytest.mark.skip(reason="a long run: make test-full (OFFSETS_AUDIT_FULL=1) runs it")
    for item in items:
        if "full" in item.keywords:
            item.add_marker(skip)


#: Test modules in the order ``make test``'s workers start them, the longest first: the run ends when the last
#: module ends, so the long ones must not be left for the end (a module's tests and its fixtures stay on one worker).
#: The rest follow in collection order. Measured by ``--durations``; a module that grows long belongs here.
LONGEST_FIRST = (
    "test_real_kafka.py",
    "test_offsets_parity.py",
    "test_incremental_parity.py",
    "test_replay_incremental.py",
    "test_connect.py",
    "test_kill.py",
    "test_spark_submit.py",
    "test_segments_spark.py",
    "test_clean_run_e2e.py",
    "test_oracle.py",
    "test_audit_causes_spark.py",
    "test_audit_check.py",
    "test_coordinator_load_spark.py",
    "test_notebooks.py",
    "test_tables.py",
)

#: Modules that share a costly session fixture run on one worker, as one work unit named after the first, so the
#: fixture's work is done once: the session broker (started, formatted) and its run of the scenarios (killed and
#: restarted in the middle).
SAME_WORKER = {
    name: "test_real_kafka.py"
    for name in ("test_real_kafka_faults.py", "test_group_configs.py", "test_kafka_source.py",
                 "test_kafka_source_dump.py", "test_kafka_stream.py", "test_topic_metadata.py")
}


class _LongestFirst:
    """``--dist loadfile`` (pytest-xdist) with this suite's order: one work unit per module (or per group of
    modules sharing a session fixture, ``SAME_WORKER``), the longest handed out first (``LONGEST_FIRST``)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config, log):
        if config.getvalue("dist") != "loadfile":
            return None
        from xdist.scheduler import LoadFileScheduling

        class Scheduling(LoadFileScheduling):
            ordered = False

            def _split_scope(self, nodeid: str) -> str:
                path = super()._split_scope(nodeid)
                folder, _, name = path.rpartition("/")
                return f"{folder}/{SAME_WORKER[name]}" if name in SAME_WORKER else path

            def _assign_work_unit(self, node) -> None:
                # The work queue is complete before its first unit is handed out: order it then, once.
                if not self.ordered:
                    self.ordered = True
                    units = sorted(self.workqueue.items(), key=lambda unit: _rank(unit[0]))
                    self.workqueue.clear()
                    self.workqueue.update(units)
                super()._assign_work_unit(node)

        return Scheduling(config, log)


def _rank(scope: str) -> int:
    name = scope.rpartition("/")[2]
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_configure(config):
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_LongestFirst(), "offsets-audit-longest-first")


settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def golden() -> Path:
    if not GOLDEN.is_dir():
        pytest.fail(f"golden data not found at {GOLDEN}: it is part of the repository (git checkout -- tests/golden)")
    return GOLDEN


@pytest.fixture(scope="session")
def connector_jars() -> list[Path]:
    """Spark's kafka connector and Delta jars, resolved with Maven (``make kafka``); the test is skipped without them."""
    import kafka_jars

    try:
        return kafka_jars.spark_connector_jars()
    except kafka_jars.JarsUnavailable as error:
        pytest.skip(f"Spark's connector jars unavailable: {error}")


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from offsets_audit.spark_session import get_spark

    session = get_spark("offsets-audit-tests", extra_conf={"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


@pytest.fixture
def namespace(spark, tmp_path):
    """A schema of the session catalog of its own (tables by name), its tables under the test's folder."""
    import uuid

    from offsets_audit.sinks.catalog import Namespace

    ns = Namespace("spark_catalog", f"audit_{uuid.uuid4().hex[:8]}")
    spark.sql(f"CREATE SCHEMA {ns.sql} LOCATION '{tmp_path / 'warehouse'}'")
    yield ns
    spark.sql(f"DROP SCHEMA IF EXISTS {ns.sql} CASCADE")


@pytest.fixture(autouse=True, scope="module")
def _release_spark_caches():
    """One JVM serves the whole run: what a module's tests cached (a job's tables, a stage's intermediates a
    test never released) is dropped when the module ends, so the heap does not fill over the run's hour."""
    yield
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.catalog.clearCache()
