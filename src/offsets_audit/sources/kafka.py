"""Live Kafka source, pure core: plan offset ranges and read them with kafka-python, no Spark needed.

Mirrors what Spark's own ``kafka`` batch source does (``KafkaOffsetReader`` planning on the driver,
``KafkaDataConsumer`` per task): end offsets are fixed once when the read is planned, so a read is a
consistent snapshot; each range is read by its own consumer that is assigned the partition and seeks to
the start (no consumer group, nothing committed) and stops when its position reaches the end offset, even
when the offsets before it have gaps (compaction, transaction markers, aborted records).

Options use the names of Spark's Kafka source (``kafka.bootstrap.servers``, ``subscribe``,
``startingOffsets``...) so a config written for ``spark.read.format("kafka")`` works unchanged here.
A consumer cannot see record-batch attributes (producer ids, control batches), so those columns are null;
see docs/sources.md.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, Mapping

from offsets_audit.errors import UserError
from offsets_audit.sources.schema import BATCH_COLUMNS

DEFAULT_TOPIC = "__consumer_offsets"
EARLIEST = -2
LATEST = -1

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_SECRET_WORDS = ("password", "jaas", "secret", "token", "credential")

#: Java consumer config names (after ``kafka.``) that kafka-python spells differently.
_RENAMED = {
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.keystore.password": "ssl_password",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
}

#: Consumer settings the reader owns: it seeks exact offsets and never commits (Spark refuses these too).
_OWNED = {"enable.auto.commit", "auto.offset.reset", "key.deserializer", "value.deserializer",
          "interceptor.classes"}


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic partition, read by one input partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition} [{self.start}, {self.end})"


@dataclass(frozen=True)
class KafkaReadConfig:
    """A parsed, validated set of Spark-style Kafka source options."""

    bootstrap_servers: str
    topics: tuple[str, ...] = (DEFAULT_TOPIC,)
    assign: tuple[tuple[str, int], ...] | None = None
    starting_offsets: Any = "earliest"
    ending_offsets: Any = "latest"
    isolation_level: str = "read_committed"
    max_records_per_partition: int | None = None
    fetch_retries: int = 3
    retry_backoff_ms: int = 500
    request_timeout_ms: int = 30000
    poll_timeout_ms: int = 1000
    fail_on_data_loss: bool = True
    max_partition_fetch_bytes: int = 1 << 20
    #: kafka-python consumer settings passed through (security and tuning); may hold secrets, never printed.
    client_options: dict = field(default_factory=dict, repr=False, compare=False)

    def describe(self) -> dict:
        """The config with secrets replaced by ``***``, safe to print or log."""
        return {
            "bootstrap_servers": self.bootstrap_servers, "topics": list(self.topics),
            "assign": self.assign, "starting_offsets": self.starting_offsets,
            "ending_offsets": self.ending_offsets, "isolation_level": self.isolation_level,
            "max_records_per_partition": self.max_records_per_partition, "fetch_retries": self.fetch_retries,
            "client_options": redact(self.client_options),
        }


class KafkaUnreachableError(UserError):
    """Kafka did not answer after the configured number of tries."""


def is_secret(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def redact(options: Mapping[str, Any]) -> dict:
    """Copy of ``options`` with every secret-looking value (passwords, JAAS config, tokens) replaced by ``***``."""
    return {key: ("***" if is_secret(str(key)) and value is not None else value) for key, value in options.items()}


def _parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise UserError(f"option {name}={value!r} is not a boolean", fix="use true or false")


def _parse_int(name: str, value: Any, minimum: int = 0) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise UserError(f"option {name}={value!r} is not an integer", fix=f"give {name} a whole number") from None
    if number < minimum:
        raise UserError(f"option {name}={number} is below {minimum}", fix=f"give {name} a value >= {minimum}")
    return number


def _parse_offsets(name: str, value: Any, default: str) -> Any:
    """``earliest`` / ``latest`` or Spark's per-partition JSON ``{"topic": {"0": 23, "1": -2}}``."""
    if value is None:
        return default
    if isinstance(value, Mapping):
        parsed = value
    else:
        text = str(value).strip()
        if text.lower() in ("earliest", "latest"):
            word = text.lower()
            if name == "startingOffsets" and word == "latest":
                raise UserError("startingOffsets=latest reads nothing in a batch read",
                                fix="use earliest or per-partition JSON offsets")
            if name == "endingOffsets" and word == "earliest":
                raise UserError("endingOffsets=earliest reads nothing in a batch read",
                                fix="use latest or per-partition JSON offsets")
            return word
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            parsed = None
    if not isinstance(parsed, Mapping) or not all(isinstance(v, Mapping) for v in parsed.values()):
        raise UserError(f"option {name}={value!r} is neither earliest/latest nor per-partition JSON",
                        fix=f'write it like {{"{DEFAULT_TOPIC}":{{"0":23,"1":-2}}}} (-2 earliest, -1 latest)')
    offsets: dict[str, dict[int, int]] = {}
    for topic, partitions in parsed.items():
        for partition, offset in partitions.items():
            try:
                p, o = int(partition), int(offset)
            except (TypeError, ValueError):
                raise UserError(f"option {name} has a non-integer entry {topic}/{partition}: {offset!r}",
                                fix="partitions and offsets must be integers") from None
            if o < EARLIEST:
                raise UserError(f"option {name} has offset {o} for {topic}-{p}",
                                fix="use an offset >= 0, -2 for earliest or -1 for latest")
            if name == "startingOffsets" and o == LATEST:
                raise UserError(f"startingOffsets -1 (latest) for {topic}-{p} reads nothing in a batch read",
                                fix="use -2 (earliest) or an offset")
            if name == "endingOffsets" and o == EARLIEST:
                raise UserError(f"endingOffsets -2 (earliest) for {topic}-{p} reads nothing in a batch read",
                                fix="use -1 (latest) or an offset")
            offsets.setdefault(str(topic), {})[p] = o
    return offsets


def _client_options(options: Mapping[str, Any]) -> dict:
    """Translate ``kafka.*`` options (Java consumer names) into kafka-python keyword arguments."""
    from kafka import KafkaConsumer

    known = KafkaConsumer.DEFAULT_CONFIG
    result: dict[str, Any] = {}
    truststore_type = str(options.get("kafka.ssl.truststore.type", "JKS")).upper()
    keystore_type = str(options.get("kafka.ssl.keystore.type", "JKS")).upper()
    for key, value in options.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka."):]
        if name in ("bootstrap.servers", "isolation.level", "request.timeout.ms",
                    "ssl.truststore.type", "ssl.keystore.type"):
            continue
        if name in _OWNED:
            raise UserError(f"option {key} is not supported: the reader assigns partitions and seeks exact offsets",
                            fix=f"remove {key}")
        if name == "sasl.jaas.config":
            result.update(_parse_jaas(str(value)))
        elif name == "ssl.truststore.location":
            _require_pem(key, truststore_type, fix="convert it to a PEM file and set kafka.ssl.truststore.type=PEM "
                                                   "(or kafka.ssl.ca.location)")
            result["ssl_cafile"] = value
        elif name == "ssl.keystore.location":
            _require_pem(key, keystore_type, fix="convert it to a PEM file holding certificate and key and set "
                                                 "kafka.ssl.keystore.type=PEM")
            result["ssl_certfile"] = value
        elif name == "ssl.endpoint.identification.algorithm":
            result["ssl_check_hostname"] = bool(str(value).strip())
        elif name in _RENAMED:
            result[_RENAMED[name]] = value
        else:
            python_name = name.replace(".", "_")
            if python_name not in known or python_name in ("kafka_client", "selector", "metric_reporters"):
                raise UserError(f"option {key} has no kafka-python equivalent",
                                fix="remove it, or pass the kafka-python setting as kafka.<name.with.dots>")
            default = known[python_name]
            if isinstance(default, bool):
                value = _parse_bool(key, value)
            elif isinstance(default, int) and not isinstance(value, int):
                value = _parse_int(key, value)
            result[python_name] = value
    return result


_JAAS_ENTRY = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _require_pem(key: str, store_type: str, *, fix: str) -> None:
    """kafka-python reads PEM files only; a JKS/PKCS12 store is a user error naming the conversion."""
    if store_type != "PEM":
        raise UserError(f"{key} is a {store_type} store, which kafka-python cannot read", fix=fix)


def _parse_jaas(text: str) -> dict:
    """username/password of a PLAIN or SCRAM ``sasl.jaas.config`` line."""
    entries = dict(_JAAS_ENTRY.findall(text))
    if "username" not in entries or "password" not in entries:
        raise UserError("kafka.sasl.jaas.config has no username=\"...\" password=\"...\" pair",
                        fix="kafka-python supports PLAIN and SCRAM logins; give both quoted values")
    return {"sasl_plain_username": entries["username"], "sasl_plain_password": entries["password"]}


def parse_options(options: Mapping[str, Any]) -> KafkaReadConfig:
    """Build a :class:`KafkaReadConfig` from Spark Kafka source options (keys are case-insensitive)."""
    by_lower = {str(k).lower(): v for k, v in options.items() if v is not None}
    # kafka.* names keep their Java spelling; lower-case is how Spark hands options over anyway.
    bootstrap = by_lower.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise UserError("the Kafka source has no kafka.bootstrap.servers",
                        fix="set kafka.bootstrap.servers to HOST:PORT[,HOST:PORT]")
    assign = None
    topics: tuple[str, ...] = (DEFAULT_TOPIC,)
    if "assign" in by_lower:
        try:
            parsed = json.loads(by_lower["assign"])
            assign = tuple((str(t), int(p)) for t, parts in parsed.items() for p in parts)
        except (ValueError, TypeError, AttributeError):
            raise UserError(f"option assign={by_lower['assign']!r} is not JSON like {{\"{DEFAULT_TOPIC}\":[0,1]}}",
                            fix="list the partitions to read per topic") from None
        topics = tuple(sorted({t for t, _ in assign}))
    elif "subscribe" in by_lower:
        topics = tuple(t.strip() for t in str(by_lower["subscribe"]).split(",") if t.strip())
        if not topics:
            raise UserError("option subscribe is empty", fix=f"name a topic, e.g. subscribe={DEFAULT_TOPIC}")
    if "subscribepattern" in by_lower:
        raise UserError("option subscribePattern is not supported by the kafka-python reader",
                        fix="list the topics in subscribe=T1,T2")
    isolation = str(by_lower.get("kafka.isolation.level", by_lower.get("isolation.level", "read_committed")))
    isolation = isolation.strip().lower()
    if isolation not in ("read_committed", "read_uncommitted"):
        raise UserError(f"isolation level {isolation!r} is unknown", fix="use read_committed or read_uncommitted")
    max_records = by_lower.get("maxrecordsperpartition")
    return KafkaReadConfig(
        bootstrap_servers=str(bootstrap),
        topics=topics,
        assign=assign,
        starting_offsets=_parse_offsets("startingOffsets", by_lower.get("startingoffsets"), "earliest"),
        ending_offsets=_parse_offsets("endingOffsets", by_lower.get("endingoffsets"), "latest"),
        isolation_level=isolation,
        max_records_per_partition=(_parse_int("maxRecordsPerPartition", max_records, 1)
                                   if max_records is not None else None),
        fetch_retries=_parse_int("fetchRetries", by_lower.get("fetchretries", 3), 1),
        retry_backoff_ms=_parse_int("retryBackoffMs", by_lower.get("retrybackoffms", 500)),
        request_timeout_ms=_parse_int("kafka.request.timeout.ms", by_lower.get("kafka.request.timeout.ms", 30000), 1),
        poll_timeout_ms=_parse_int("pollTimeoutMs", by_lower.get("polltimeoutms", 1000), 1),
        fail_on_data_loss=_parse_bool("failOnDataLoss", by_lower.get("failondataloss", True)),
        max_partition_fetch_bytes=_parse_int(
            "kafka.max.partition.fetch.bytes", by_lower.get("kafka.max.partition.fetch.bytes", 1 << 20), 1),
        client_options=_client_options({k: v for k, v in by_lower.items()
                                        if k != "kafka.max.partition.fetch.bytes"}),
    )


def as_config(config: KafkaReadConfig | Mapping[str, Any]) -> KafkaReadConfig:
    return config if isinstance(config, KafkaReadConfig) else parse_options(config)


# --- talking to the broker -------------------------------------------------------------------------------


def _transient_errors() -> tuple[type[BaseException], ...]:
    import kafka.errors as errors

    return (errors.KafkaTimeoutError, errors.KafkaConnectionError, errors.NodeNotReadyError,
            errors.RetriableError, getattr(errors, "NoBrokersAvailable", errors.KafkaConnectionError),
            )


def new_consumer(config: KafkaReadConfig):
    """A group-less consumer that never commits, reading with the configured isolation level."""
    from kafka import KafkaConsumer

    from offsets_audit.kafka_client import client_settings

    settings = {
        "bootstrap_servers": config.bootstrap_servers.split(","),
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "none",
        "isolation_level": config.isolation_level,
        "request_timeout_ms": config.request_timeout_ms,
        "max_partition_fetch_bytes": config.max_partition_fetch_bytes,
        "fetch_max_bytes": max(config.max_partition_fetch_bytes, 50 << 20),
        "retry_backoff_ms": min(config.retry_backoff_ms, 1000) or 100,
    }
    settings.update(config.client_options)
    return KafkaConsumer(**client_settings(KafkaConsumer, settings, min(config.request_timeout_ms, 10000)))


def _unreachable(config: KafkaReadConfig, tries: int, error: BaseException) -> KafkaUnreachableError:
    return KafkaUnreachableError(
        f"could not reach Kafka at {config.bootstrap_servers} after {tries} {'try' if tries == 1 else 'tries'} "
        f"({type(error).__name__})",
        fix="check kafka.bootstrap.servers and the kafka.security.* / kafka.sasl.* / kafka.ssl.* options")


def _backoff(config: KafkaReadConfig, attempt: int) -> None:
    time.sleep(config.retry_backoff_ms / 1000.0 * (2 ** min(attempt - 1, 5)))


def resolve_offsets(config: KafkaReadConfig | Mapping[str, Any]) -> dict[tuple[str, int], tuple[int, int]]:
    """Ask the broker once for every wanted topic partition's ``(start, end)`` offsets (retrying transient errors).

    ``latest`` is the high watermark under read_uncommitted and the last stable offset under read_committed.
    """
    config = as_config(config)
    transient = _transient_errors()
    attempt = 0
    while True:
        attempt += 1
        consumer = None
        try:
            consumer = new_consumer(config)
            return _resolve_bounds(config, consumer)
        # A retry restarts the lookup (read_range's retry resumes at the position reached instead).
        except transient as exc:
            if attempt >= config.fetch_retries:
                raise _unreachable(config, attempt, exc) from exc
            _backoff(config, attempt)
        finally:
            if consumer is not None:
                consumer.close()


def plan_ranges(config: KafkaReadConfig | Mapping[str, Any]) -> list[OffsetRange]:
    """Resolve starting/ending offsets against the broker once: one range per topic partition with records,
    split into ranges of at most ``maxRecordsPerPartition`` offsets (like Spark's ``KafkaOffsetReader``)."""
    config = as_config(config)
    ranges = []
    for (topic, partition), (start, end) in sorted(resolve_offsets(config).items()):
        ranges.extend(split_range(OffsetRange(topic, partition, start, end), config.max_records_per_partition))
    return ranges


def pinned_options(options: Mapping[str, Any], bounds: Mapping[tuple[str, int], tuple[int, int]]) -> dict:
    """``options`` with ``assign``/``startingOffsets``/``endingOffsets`` replaced by resolved offsets, so every
    later planning of the same read sees the same snapshot."""
    dropped = {"assign", "subscribe", "subscribepattern", "startingoffsets", "endingoffsets"}
    pinned = {k: v for k, v in options.items() if str(k).lower() not in dropped}
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for (topic, partition), (start, end) in sorted(bounds.items()):
        assign.setdefault(topic, []).append(partition)
        starting.setdefault(topic, {})[str(partition)] = start
        ending.setdefault(topic, {})[str(partition)] = end
    pinned.update(assign=json.dumps(assign), startingOffsets=json.dumps(starting), endingOffsets=json.dumps(ending))
    return pinned


def split_range(offset_range: OffsetRange, max_records: int | None) -> list[OffsetRange]:
    """Split ``[start, end)`` into consecutive pieces of at most ``max_records`` offsets; empty ranges vanish."""
    if offset_range.size == 0:
        return []
    if not max_records or offset_range.size <= max_records:
        return [offset_range]
    return [OffsetRange(offset_range.topic, offset_range.partition, lo, min(lo + max_records, offset_range.end))
            for lo in range(offset_range.start, offset_range.end, max_records)]


def _topic_partitions(config: KafkaReadConfig, consumer) -> list:
    from kafka import TopicPartition

    if config.assign is not None:
        wanted = list(config.assign)
    else:
        wanted = []
        for topic in config.topics:
            partitions = consumer.partitions_for_topic(topic)
            if not partitions:
                raise UserError(f"topic {topic} does not exist at {config.bootstrap_servers}",
                                fix="check the subscribe option (the audit reads __consumer_offsets)")
            wanted.extend((topic, p) for p in partitions)
    return [TopicPartition(t, p) for t, p in sorted(set(wanted))]


def _resolve_bounds(config: KafkaReadConfig, consumer) -> dict[tuple[str, int], tuple[int, int]]:
    tps = _topic_partitions(config, consumer)
    timeout = config.request_timeout_ms
    earliest = consumer.beginning_offsets(tps, timeout_ms=timeout)
    # With read_committed this is the last stable offset: records of open transactions are left out.
    latest = consumer.end_offsets(tps, timeout_ms=timeout)
    bounds = {}
    for tp in tps:
        low, high = earliest[tp], latest[tp]
        start = _pick(config.starting_offsets, tp, low, high, default=low)
        end = _pick(config.ending_offsets, tp, low, high, default=high)
        if start < low:
            if config.fail_on_data_loss:
                raise UserError(
                    f"startingOffsets asks for {tp.topic}-{tp.partition} offset {start} but the log starts at {low} "
                    f"(older records were deleted)", fix="start at -2 (earliest) or set failOnDataLoss=false")
            start = low
        bounds[(tp.topic, tp.partition)] = (start, min(max(end, start), high))
    return bounds


def _pick(spec: Any, tp, low: int, high: int, default: int) -> int:
    if spec == "earliest":
        return low
    if spec == "latest":
        return high
    offset = spec.get(tp.topic, {}).get(tp.partition)
    if offset is None:
        return default
    return {EARLIEST: low, LATEST: high}.get(offset, offset)


# --- reading a range -------------------------------------------------------------------------------------


def record_to_row(record) -> dict:
    """One kafka-python ``ConsumerRecord`` as a SOURCE_SCHEMA row (batch attributes unknown to a consumer)."""
    timestamp = record.timestamp
    row = {
        "key": record.key,
        "value": record.value,
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": None if timestamp is None else _EPOCH + timedelta(milliseconds=timestamp),
        "timestampType": -1 if record.timestamp_type is None else int(record.timestamp_type),
    }
    for name in BATCH_COLUMNS:
        row[name] = None
    return row


def read_range(config: KafkaReadConfig | Mapping[str, Any], offset_range: OffsetRange) -> Iterator[dict]:
    """Yield the records of ``offset_range`` in offset order as SOURCE_SCHEMA dicts.

    Stops once the consumer's position reaches ``end`` (records may be missing below it: compacted away,
    transaction markers, aborted records under read_committed). Transient broker errors reconnect and
    resume from the next unread offset, up to ``fetchRetries`` tries in a row without progress.
    """
    import kafka.errors as errors
    from kafka import TopicPartition

    config = as_config(config)
    transient = _transient_errors()
    tp = TopicPartition(offset_range.topic, offset_range.partition)
    position = offset_range.start
    failures = 0
    while position < offset_range.end:
        consumer = None
        try:
            consumer = new_consumer(config)
            consumer.assign([tp])
            consumer.seek(tp, position)
            idle_since = time.monotonic()
            while position < offset_range.end:
                try:
                    fetched = consumer.poll(timeout_ms=config.poll_timeout_ms).get(tp, [])
                except errors.OffsetOutOfRangeError:
                    position = _after_data_loss(config, consumer, tp, position, offset_range)
                    consumer.seek(tp, position)
                    continue
                for record in fetched:
                    if record.offset >= offset_range.end:
                        position = offset_range.end
                        break
                    if record.offset >= position:
                        yield record_to_row(record)
                        position = record.offset + 1
                if fetched:
                    failures = 0
                    idle_since = time.monotonic()
                # Skipped offsets (markers, aborted or compacted records) move the position without records.
                position = max(position, min(consumer.position(tp), offset_range.end))
                if not fetched and time.monotonic() - idle_since > config.request_timeout_ms / 1000.0:
                    raise errors.KafkaTimeoutError(f"no progress reading {offset_range} at offset {position}")
        # A retry resumes at the position already read.
        except transient as exc:
            failures += 1
            if failures >= config.fetch_retries:
                raise _unreachable(config, failures, exc) from exc
            _backoff(config, failures)
        finally:
            if consumer is not None:
                consumer.close()


def _after_data_loss(config: KafkaReadConfig, consumer, tp, position: int, offset_range: OffsetRange) -> int:
    low = consumer.beginning_offsets([tp], timeout_ms=config.request_timeout_ms)[tp]
    if config.fail_on_data_loss or low <= position:
        raise UserError(
            f"{offset_range.topic}-{offset_range.partition} offsets {position} to {low} were deleted before "
            f"they were read (log start is now {low})", fix="re-run the read, or set failOnDataLoss=false to skip them")
    return low
