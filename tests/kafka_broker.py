"""A real Apache Kafka broker for the tests: one KRaft node (broker and controller) on 127.0.0.1.

The broker runs from the jars ``tests/kafka_jars.py`` resolves with Maven (``.cache/kafka/<version>/libs``):
``kafka.tools.StorageTool format`` then ``kafka.Kafka server.properties``, in a temp folder holding its
``server.properties``, its log dir and a Log4j 2 config that writes ``server.log`` beside them. Its
``__consumer_offsets`` has few partitions, segments that roll every few seconds (``log.roll.ms``) and is not
compacted unless a test asks for it, and the group coordinator's lower bounds (session timeouts, heartbeat intervals) are lowered so
members joining, leaving and expiring take a second, not a minute. Share and streams groups are enabled on
the versions that have them (:attr:`KafkaBroker.supports`).

Kafka's own tools run against it on the same classpath: ``kafka-dump-log`` (:meth:`KafkaBroker.dump_log`),
``kafka-consumer-groups``, ``kafka-share-groups`` and ``kafka-streams-groups`` (:meth:`KafkaBroker.groups_tool`),
several of them in one JVM (:meth:`KafkaBroker.run_tools`, the ``ToolRunner`` helper) because a JVM start is
what a tool invocation costs.

Fixtures (imported by ``tests/conftest.py``, so any test module can ask for them):

* ``kafka_broker``: one broker of the default version for the whole session, started on first use;
* ``kafka_broker_factory``: ``factory(version=..., **server_properties)`` starts a broker of a module's own
  (stopped when the test that asked for it ends; use it from a module-scoped fixture for a module's broker).
* ``real_kafka_run`` (in ``real_kafka.py``): the session's one run of every scenario on ``kafka_broker``, which
  kills that broker (-9) once and starts it again on the same port and log dir.

Both are skipped, with the reason, when Maven or a JDK is missing or the jars cannot be resolved.
"""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import pytest

import kafka_jars
from kafka_jars import DEFAULT_KAFKA_VERSION, JarsUnavailable

OFFSETS_TOPIC = "__consumer_offsets"

#: ``log.roll.ms`` of the test broker: a segment rolls on the first append this long after it was opened, so a
#: scenario's ``__consumer_offsets`` spans several segments and the readers cross segment boundaries (newer
#: brokers refuse ``segment.bytes`` below 1 MiB, more than the scenarios write).
SEGMENT_ROLL_MS = 3000


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


@dataclass(frozen=True)
class Support:
    """What a Kafka version's broker offers the tests (what its release enabled, GA or early access)."""

    consumer: bool   # KIP-848 consumer groups (group.protocol=consumer)
    share: bool      # KIP-932 share groups (KafkaShareConsumer)
    streams: bool    # KIP-1071 streams groups (group.protocol=streams)
    dump_log_class: str
    config_command_class: str
    #: The group configs ``<type>.assignment.interval.ms`` (KIP-1263).
    assignment_interval: bool


def support(version: str) -> Support:
    v = version_key(version)
    return Support(
        consumer=v >= (3, 9),
        share=v >= (4, 0),
        streams=v >= (4, 2),  # early access in 4.1 (not covered here)
        dump_log_class="org.apache.kafka.tools.DumpLogSegments" if v >= (4, 3) else "kafka.tools.DumpLogSegments",
        config_command_class="org.apache.kafka.tools.ConfigCommand" if v >= (4, 3) else "kafka.admin.ConfigCommand",
        assignment_interval=v >= (4, 3),
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_properties(version: str, port: int, controller_port: int, log_dir: Path) -> dict[str, str]:
    """The broker's settings: one KRaft node, and a group coordinator whose timings suit tests."""
    v = version_key(version)
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        # the controller's no-op records every half second move the metadata image on, and a group subscribed
        # by regex then rewrites its resolved topics at every refresh; a test cluster whose topics stand still
        # keeps its image still instead
        "metadata.max.idle.interval.ms": str(3600 * 1000),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "auto.create.topics.enable": "false",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "num.recovery.threads.per.data.dir": "1",
        "log.flush.interval.messages": str(2**63 - 1),
        # __consumer_offsets: few partitions, segments that roll every few seconds of activity, and no
        # compaction unless a test asks for it (a compacted segment changes under a reader comparing two reads)
        "offsets.topic.num.partitions": "3",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.segment.bytes": str(1024 * 1024),
        "log.roll.ms": str(SEGMENT_ROLL_MS),
        "log.roll.jitter.ms": "0",
        "log.cleaner.min.compaction.lag.ms": str(3600 * 1000),
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "2",
        # groups: rebalances start at once, members expire in seconds
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "500",
        "group.coordinator.threads": "1",
    }
    if v >= (3, 9):
        props.update({
            "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.session.timeout.ms": "3000",
            "group.consumer.min.heartbeat.interval.ms": "100",
            "group.consumer.heartbeat.interval.ms": "300",
            # online upgrade and downgrade between the classic and consumer protocols (off by default on 3.9)
            "group.consumer.migration.policy": "bidirectional",
        })
    if v < (4, 0):
        props.update({"group.coordinator.new.enable": "true", "group.coordinator.rebalance.protocols": "classic,consumer"})
    if v >= (4, 0):
        props.update({
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "share.coordinator.state.topic.num.partitions": "1",
            "group.share.min.session.timeout.ms": "1000",
            "group.share.session.timeout.ms": "3000",
            "group.share.min.heartbeat.interval.ms": "100",
            "group.share.heartbeat.interval.ms": "300",
        })
    if (4, 0) <= v < (4, 1):
        # share groups are early access in 4.0: enabled by settings, not by a feature level
        props.update({"group.share.enable": "true", "unstable.api.versions.enable": "true",
                      "group.coordinator.rebalance.protocols": "classic,consumer,share"})
    if v >= (4, 2):
        props.update({
            "group.streams.min.session.timeout.ms": "1000",
            "group.streams.session.timeout.ms": "3000",
            "group.streams.min.heartbeat.interval.ms": "100",
            "group.streams.heartbeat.interval.ms": "300",
            "group.streams.initial.rebalance.delay.ms": "0",
        })
    if v >= (4, 2):
        # a topic created while a group subscribes by regex is matched within seconds (the least allowed)
        props["group.consumer.regex.refresh.interval.ms"] = "10000"
    return props


def _features(version: str) -> list[str]:
    """``StorageTool format --feature`` arguments: share and streams groups where they are a feature level."""
    v = version_key(version)
    if v >= (4, 2):
        return ["--feature", "share.version=1", "--feature", "streams.version=1"]
    if v >= (4, 1):
        return ["--feature", "share.version=1"]
    return []


_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
logger.kafka-request.name = kafka.request.logger
logger.kafka-request.level = WARN
logger.coordinator.name = org.apache.kafka.coordinator
logger.coordinator.level = INFO
"""


def log4j2_config(folder: Path, name: str, level: str = "INFO") -> Path:
    """A Log4j 2 properties file sending everything at ``level`` to ``folder/<name>.log``."""
    path = folder / f"{name}-log4j2.properties"
    path.write_text(_LOG4J2.format(path=folder / f"{name}.log", level=level))
    return path


def _java_options(log_config: Path, heap: str = "512m", extra: Sequence[str] = ()) -> list[str]:
    return [f"-Xmx{heap}", "-XX:+UseSerialGC", f"-Dlog4j2.configurationFile={log_config}",
            f"-Dlog4j.configuration=file:{log_config}", "-Djava.awt.headless=true", *extra]


#: JVM options for short-lived tool and helper JVMs: C1 only starts faster than a tiered JVM.
TOOL_JVM = ("-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")


class BrokerFailed(RuntimeError):
    """The broker process exited or did not become ready; the message ends with the tail of its log."""


@dataclass
class ToolRun:
    """One tool invocation's outcome: its exit code and what it printed."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def check(self) -> ToolRun:
        if self.returncode != 0:
            raise AssertionError(f"{' '.join(self.args)} exited {self.returncode}:\n{self.stderr[-3000:]}\n{self.stdout[-2000:]}")
        return self


class KafkaBroker:
    """A single-node KRaft broker in ``folder`` (config, log dir, logs); start, stop, kill -9, restart.

    ``overrides`` replace or add ``server.properties`` entries (``None`` removes one). The log dir, ports and
    cluster id stay the same across restarts, so a restarted broker loads the log the killed one left.
    """

    def __init__(self, folder: Path, version: str = DEFAULT_KAFKA_VERSION,
                 overrides: Mapping[str, str | None] | None = None) -> None:
        self.version = version
        self.supports = support(version)
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.log_dir = self.folder / "kafka-logs"
        self.port = free_port()
        self.controller_port = free_port()
        self.cluster_id = _cluster_id()
        self.properties = _server_properties(version, self.port, self.controller_port, self.log_dir)
        for key, value in (overrides or {}).items():
            if value is None:
                self.properties.pop(key, None)
            else:
                self.properties[key] = str(value)
        self.config_path = self.folder / "server.properties"
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        self.log4j = log4j2_config(self.folder, "server")
        self.server_log = self.folder / "server.log"
        self.tool_log4j = log4j2_config(self.folder, "tools", level="WARN")
        self.process: subprocess.Popen | None = None
        self.formatted = False
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # -- lifecycle -------------------------------------------------------------------------------------

    def _format(self) -> None:
        command = kafka_jars.java_command(
            "kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(self.config_path),
            *_features(self.version), version=self.version, jvm_options=_java_options(self.tool_log4j, "256m", TOOL_JVM[2:]))
        done = subprocess.run(command, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise BrokerFailed(f"kafka-storage format failed for Kafka {self.version}:\n{done.stdout}\n{done.stderr[-3000:]}")
        self.formatted = True

    def start(self, timeout_s: float = 120.0) -> KafkaBroker:
        """Format the log dir (first start only), start the broker and return once it serves requests."""
        if self.running:
            return self
        if not self.formatted:
            self._format()
        command = kafka_jars.java_command("kafka.Kafka", str(self.config_path), version=self.version,
                                          jvm_options=_java_options(self.log4j, "768m"))
        self.started_at_log_size = self.server_log.stat().st_size if self.server_log.exists() else 0
        stdout = open(self.folder / "server.out", "ab")
        self.process = subprocess.Popen(command, stdout=stdout, stderr=subprocess.STDOUT, cwd=self.folder,
                                        start_new_session=True)
        stdout.close()
        self.starts += 1
        self._wait_ready(timeout_s)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        marker = re.compile(r"Kafka Server started|\[KafkaRaftServer nodeId=\d+\] Kafka Server started")
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise BrokerFailed(f"Kafka {self.version} broker exited with {self.process and self.process.returncode}"
                                   f" before it was ready:\n{self.log_tail()}")
            if self.server_log.exists():
                with open(self.server_log, "rb") as log:
                    log.seek(self.started_at_log_size)
                    if marker.search(log.read().decode("utf-8", "replace")):
                        return
            time.sleep(0.2)
        raise BrokerFailed(f"Kafka {self.version} broker not ready within {timeout_s:.0f}s:\n{self.log_tail()}")

    def stop(self, timeout_s: float = 60.0) -> None:
        """A controlled shutdown (SIGTERM): the broker flushes its logs and writes its clean-shutdown marker."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self.process = None

    def kill(self) -> None:
        """``kill -9``: the broker dies mid-write, as a crashed host's does (no flush, no clean-shutdown marker)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process = None

    def restart(self, *, hard: bool = False, timeout_s: float = 120.0) -> KafkaBroker:
        """Stop (``hard``: kill -9) and start again on the same ports and log dir."""
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start(timeout_s)

    def close(self) -> None:
        self.stop()

    def log_tail(self, lines: int = 40) -> str:
        text = ""
        for path in (self.server_log, self.folder / "server.out"):
            if path.exists():
                text += f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text

    # -- the log ---------------------------------------------------------------------------------------

    def offsets_partition_dirs(self) -> list[Path]:
        """The broker's ``__consumer_offsets-N`` folders, by partition."""
        found = [p for p in self.log_dir.glob(f"{OFFSETS_TOPIC}-*") if p.is_dir() and p.name.rsplit("-", 1)[1].isdigit()]
        return sorted(found, key=lambda p: int(p.name.rsplit("-", 1)[1]))

    def offsets_segments(self) -> list[Path]:
        """Every ``.log`` segment of ``__consumer_offsets``, by partition and base offset."""
        return [segment for folder in self.offsets_partition_dirs() for segment in sorted(folder.glob("*.log"))]

    def copy_offsets_log(self, dest: Path) -> Path:
        """A copy of the ``__consumer_offsets-N`` folders (segments and indexes) under ``dest``, as a user
        copies a broker's log dir to audit it; taken while the broker runs, it holds what was flushed to the
        page cache, which is everything the broker appended."""
        dest.mkdir(parents=True, exist_ok=True)
        for folder in self.offsets_partition_dirs():
            shutil.copytree(folder, dest / folder.name, dirs_exist_ok=True)
        return dest

    # -- Kafka's tools -----------------------------------------------------------------------------------

    def java_command(self, main_class: str, *args: str, jvm_options: Sequence[str] = TOOL_JVM) -> list[str]:
        """A ``java`` command running ``main_class`` (Kafka's or a helper's) on this version's classpath."""
        return kafka_jars.java_command(main_class, *args, version=self.version,
                                       jvm_options=[*jvm_options, f"-Dlog4j2.configurationFile={self.tool_log4j}"])

    def run_tools(self, invocations: Sequence[Sequence[str]], timeout_s: float = 300.0) -> list[ToolRun]:
        """Run several tool mains (``[main_class, *args]`` each) one after the other in ONE JVM (the
        ``ToolRunner`` helper: each tool's ``Exit`` is caught, its stdout and stderr captured)."""
        return run_tools(invocations, self.version, self.folder, self.tool_log4j, timeout_s)

    def run_tool(self, main_class: str, *args: str, timeout_s: float = 300.0) -> ToolRun:
        return self.run_tools([[main_class, *args]], timeout_s)[0]

    def dump_log_invocation(self, segments: Sequence[Path]) -> list[str]:
        """``kafka-dump-log --offsets-decoder --print-data-log`` over ``segments`` (a tool invocation)."""
        return dump_log_invocation(self.version, segments)

    def dump_log(self, segments: Sequence[Path] | None = None) -> str:
        """What ``kafka-dump-log --offsets-decoder`` prints for ``segments`` (default: all of ``__consumer_offsets``)."""
        return self.run_tools([self.dump_log_invocation(segments or self.offsets_segments())])[0].check().stdout

    GROUP_TOOLS = {
        "consumer": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "share": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
        "streams": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    }

    def groups_invocation(self, kind: str, *args: str) -> list[str]:
        """``kafka-consumer-groups`` (``kind="consumer"``), ``kafka-share-groups`` or ``kafka-streams-groups``
        against this broker (a tool invocation)."""
        return [self.GROUP_TOOLS[kind], "--bootstrap-server", self.bootstrap, *args]

    def configs_invocation(self, *args: str) -> list[str]:
        """``kafka-configs`` against this broker (a tool invocation)."""
        return [self.supports.config_command_class, "--bootstrap-server", self.bootstrap, *args]

    def groups_tool(self, kind: str, *args: str) -> str:
        return self.run_tools([self.groups_invocation(kind, *args)])[0].check().stdout

    # -- clients -------------------------------------------------------------------------------------------

    def end_offsets(self, topic: str = OFFSETS_TOPIC) -> dict[int, int]:
        """The high watermark of each partition of ``topic`` (what a read_committed reader may read up to
        is at most this)."""
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, request_timeout_ms=15000,
                                 exclude_internal_topics=False)
        try:
            partitions = consumer.partitions_for_topic(topic) or set()
            ends = consumer.end_offsets([TopicPartition(topic, p) for p in sorted(partitions)])
            return {tp.partition: offset for tp, offset in ends.items()}
        finally:
            consumer.close()

    def create_topic(self, topic: str, partitions: int = 1, configs: Mapping[str, str] | None = None) -> None:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=15000)
        try:
            admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=dict(configs or {}))])
        finally:
            admin.close()


def run_tools(invocations: Sequence[Sequence[str]], version: str, folder: Path, log_config: Path | None = None,
              timeout_s: float = 300.0) -> list[ToolRun]:
    """Kafka ``version``'s tool mains (``[main_class, *args]`` each) one after the other in ONE JVM (the
    ``ToolRunner`` helper), working in a temp folder under ``folder``; no broker needed (kafka-dump-log over
    a copied log dir, or tools pointed at any cluster)."""
    folder.mkdir(parents=True, exist_ok=True)
    log_config = log_config or log4j2_config(folder, "tools", level="WARN")
    with tempfile.TemporaryDirectory(dir=folder, prefix="tools-") as work:
        work_path = Path(work)
        spec = work_path / "invocations.txt"
        # one invocation per line, arguments separated by a unit separator (none of them holds one)
        spec.write_text("".join("\x1f".join(call) + "\n" for call in invocations))
        command = kafka_jars.java_command("offsetsaudit.tools.ToolRunner", str(spec), str(work_path), version=version,
                                          jvm_options=[*TOOL_JVM, f"-Dlog4j2.configurationFile={log_config}"])
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise AssertionError(f"ToolRunner failed ({done.returncode}):\n{done.stderr[-4000:]}")
        runs = []
        for i, call in enumerate(invocations):
            rc_path = work_path / f"{i}.rc"
            runs.append(ToolRun(tuple(call), int(rc_path.read_text()) if rc_path.exists() else -1,
                                (work_path / f"{i}.out").read_text(errors="replace"),
                                (work_path / f"{i}.err").read_text(errors="replace")))
        return runs


def dump_log_invocation(version: str, segments: Sequence[Path]) -> list[str]:
    """``kafka-dump-log --offsets-decoder --print-data-log`` of Kafka ``version`` over ``segments``."""
    return [support(version).dump_log_class, "--offsets-decoder", "--print-data-log",
            "--files", ",".join(str(s) for s in segments)]


def _cluster_id() -> str:
    """A Kafka ``Uuid`` as ``kafka-storage random-uuid`` prints it (URL-safe base64 of 16 bytes, no padding).

    Like Kafka's ``Uuid.randomUuid``, never one that starts with ``-``: a command line would read it as an option
    (``kafka-storage format -t -abc...`` fails with "expected one argument")."""
    import base64

    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


@contextmanager
def running_broker(folder: Path, version: str = DEFAULT_KAFKA_VERSION,
                   overrides: Mapping[str, str | None] | None = None) -> Iterator[KafkaBroker]:
    """A started broker in ``folder``, always stopped (killed if it will not stop) on the way out."""
    broker = KafkaBroker(folder, version, overrides)
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


def require_jars(version: str) -> None:
    try:
        kafka_jars.helper_classes(version)
    except JarsUnavailable as error:
        pytest.skip(f"Kafka {version} jars unavailable: {error}")


def broker_versions(config) -> list[str]:
    """The Kafka versions a real-broker test module runs on: ``--kafka-versions`` (``all`` = the matrix),
    else the default version."""
    option = config.getoption("--kafka-versions", default=None) if config is not None else None
    if not option:
        return [DEFAULT_KAFKA_VERSION]
    if option == "all":
        return list(kafka_jars.KAFKA_VERSIONS)
    return [v.strip() for v in option.split(",") if v.strip()]


#: The session broker authorizes requests as a secured cluster does (``StandardAuthorizer``), but with no ACL every
#: request is allowed (``allow.everyone.if.no.acl.found``), so the tests that need none see an open broker and a
#: test can deny one operation on a resource pattern of its own (:func:`describe_configs_refused`). There is no
#: super user: on PLAINTEXT every client, the broker's own requests included, is ``User:ANONYMOUS``, so making the
#: broker's principal a super user would exempt the tests' clients too; the broker's own requests touch no resource
#: with an ACL.
SESSION_AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "allow.everyone.if.no.acl.found": "true"}


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory) -> Iterator[KafkaBroker]:
    """One real broker of the default Kafka version for the whole session (started on first use), with an
    authorizer that allows everything until a test adds an ACL (``SESSION_AUTHORIZER``)."""
    require_jars(DEFAULT_KAFKA_VERSION)
    with running_broker(tmp_path_factory.mktemp("kafka-broker"), overrides=SESSION_AUTHORIZER) as broker:
        yield broker


@contextmanager
def describe_configs_refused(broker: KafkaBroker, group_prefix: str, timeout_s: float = 30.0) -> Iterator[None]:
    """Inside the block, ``broker`` refuses DescribeConfigs on every group whose id starts with ``group_prefix``
    (a PREFIXED ACL denying DESCRIBE_CONFIGS to ``User:ANONYMOUS``, beside one allowing everything else on those
    groups: an authorizer that finds any ACL on a resource denies what none allows). The ACLs are removed on the
    way out. ACLs reach the authorizer through the metadata log, so both ways wait until a probe group's
    DescribeConfigs answers as expected."""
    from kafka.admin import (
        ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ConfigResourceType, KafkaAdminClient,
        ResourcePattern, ResourcePatternFilter, ResourceType,
    )

    pattern = ResourcePattern(ResourceType.GROUP, group_prefix, ACLResourcePatternType.PREFIXED)
    acls = [ACL("User:ANONYMOUS", "*", ACLOperation.ALL, ACLPermissionType.ALLOW, pattern),
            ACL("User:ANONYMOUS", "*", ACLOperation.DESCRIBE_CONFIGS, ACLPermissionType.DENY, pattern)]
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="tests-acls", request_timeout_ms=15000)

    def refused() -> bool:
        from offsets_audit.group_configs import describe_groups

        _, errors = describe_groups(admin, [(ConfigResourceType.GROUP.value, f"{group_prefix}probe")])
        return bool(errors)

    def wait(expected: bool) -> None:
        deadline = time.monotonic() + timeout_s
        while refused() != expected:
            assert time.monotonic() < deadline, f"the ACLs on {group_prefix}* did not take effect"
            time.sleep(0.2)

    try:
        result = admin.create_acls(acls)
        assert not result.get("failed"), result
        wait(True)
        yield
    finally:
        admin.delete_acls([ACLFilter("User:ANONYMOUS", "*", ACLOperation.ANY, ACLPermissionType.ANY,
                                     ResourcePatternFilter(ResourceType.GROUP, group_prefix,
                                                           ACLResourcePatternType.PREFIXED))])
        wait(False)
        admin.close()


@pytest.fixture(scope="session")
def kafka_broker_factory(tmp_path_factory) -> Iterator[Callable[..., KafkaBroker]]:
    """``factory(version=DEFAULT, **server_properties)`` starts a broker of the caller's own (property names
    with ``_`` for ``.``). Stop it when done with it (``broker.stop()``); any still running at the end of the
    session are stopped then. A module-scoped fixture can also use ``running_broker(folder, version)``."""
    started: list[KafkaBroker] = []

    def factory(version: str = DEFAULT_KAFKA_VERSION, **overrides: str | None) -> KafkaBroker:
        require_jars(version)
        broker = KafkaBroker(tmp_path_factory.mktemp(f"kafka-{version}"), version,
                             {k.replace("_", "."): v for k, v in overrides.items()})
        started.append(broker)
        return broker.start()

    yield factory
    for broker in started:
        broker.stop()
