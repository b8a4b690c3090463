"""The Kafka broker of the integration tests: the session's real Apache Kafka broker (``kafka_broker.py``).

Set ``KAFKA_BOOTSTRAP=host:port`` to run the same tests against another cluster instead. The helpers here
(topics, producing raw coordinator records) work against either.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import pytest

from kafka_broker import free_port  # noqa: F401  (re-exported: tests import it from here)


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
def real_broker(version: str | None = None) -> Iterator[str]:
    """A real Kafka broker in a temp folder for the length of the block (benches): its bootstrap address."""
    from kafka_broker import DEFAULT_KAFKA_VERSION, running_broker

    with tempfile.TemporaryDirectory(prefix="kafka-broker-") as folder:
        with running_broker(Path(folder), version or DEFAULT_KAFKA_VERSION) as broker:
            yield broker.bootstrap


@pytest.fixture(scope="session")
def kafka_bootstrap(request) -> Iterator[str]:
    """Bootstrap address of a broker for the whole session: ``KAFKA_BOOTSTRAP`` if set, else the session's real
    Kafka broker (``kafka_broker``, started on first use)."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        wait_until_ready(external)
        yield external
        return
    yield request.getfixturevalue("kafka_broker").bootstrap


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
    """Send ``(partition, key, value)`` records in order; return their (partition, offset)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=30000,
                             max_in_flight_requests_per_connection=1)
    try:
        sent = [producer.send(topic, key=key, value=value, partition=partition) for partition, key, value in records]
        producer.flush(timeout=60)
        return [(metadata.partition, metadata.offset) for metadata in (future.get(timeout=30) for future in sent)]
    finally:
        producer.close()
