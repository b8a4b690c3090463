"""Sources: bytes in, Spark Kafka-source rows out (live Kafka, Parquet dumps, broker log segments)."""

from __future__ import annotations

from offsets_audit.spark_api import default_parallelism, has_data_source
from offsets_audit.sources.options import option_text
from offsets_audit.sources.options import required_path as _required_path
from offsets_audit.sources.options import text_options as _text_options

__all__ = ["option_text", "read", "register", "spark_kafka_available", "spark_kafka_options"]

_REGISTERED: set[tuple[int, str]] = set()


def register(spark, *sources) -> None:
    """Register the Python Data Sources ``kafka-segments`` and ``kafka-python`` on ``spark``, or the ``sources``
    given (idempotent)."""
    if not sources:
        from offsets_audit.sources.kafka_spark import KafkaPythonDataSource
        from offsets_audit.sources.segments_source import SegmentsDataSource

        sources = (SegmentsDataSource, KafkaPythonDataSource)
    for source in sources:
        key = (id(spark), source.name())
        if key not in _REGISTERED:
            spark.dataSource.register(source)
            _REGISTERED.add(key)


#: Keys of a source config that choose or locate the source rather than being reader options.
_CONFIG_KEYS = ("kind", "path", "reader")
#: Options only the kafka-python reader understands; Spark's kafka source is not given them.
_PYTHON_ONLY_OPTIONS = ("fetchretries", "retrybackoffms", "polltimeoutms", "rowsperbatch", "isolation.level")


def read(spark, source_config, *, report: dict | None = None, formats: dict | None = None):
    """The one entry point the jobs use: a DataFrame with SOURCE_SCHEMA's columns from a source config.

    ``source_config`` is a mapping with ``kind`` and the source's options:

    * ``{"kind": "kafka", "kafka.bootstrap.servers": ..., "subscribe": ..., "startingOffsets": ...}``: a live
      read. Spark's own ``kafka`` source when its jar is on the classpath, else ``kafka-python``;
      ``reader: spark|kafka-python`` forces one. Isolation defaults to read_committed.
    * ``{"kind": "parquet", "path": ...}``: a dump written by ``offsets-audit dump`` (or any Kafka-source columns).
    * ``{"kind": "segments", "path": ...}``: broker log segments through the ``kafka-segments`` source.

    Options are checked (``check_options``) and files planned on the driver before any Spark work, so a
    mistake is one line. ``report``, when given, receives ``skipped_files`` (path, why) and ``notes`` (what a
    person should know about how the input was read); both are also printed to stderr.

    ``formats`` maps the name of one of the sources' Python Data Sources (``kafka-segments``) to ``(source,
    options)``: a Data Source class (registered on the session when tasks read it) that takes the same options, plus
    these, and returns the same rows with columns added (the codec's ``kafka-segments+decoded``). The planning and
    checks above are the same.

    Segments of at most ``DRIVER_READ_MAX_BYTES`` in all are read by the driver through the same source's reader
    (``_read_on_driver``); larger logs by Spark tasks.
    """
    from offsets_audit.errors import UserError

    if not hasattr(source_config, "get"):
        raise UserError(f"source config must be a mapping with a kind, got {type(source_config).__name__}",
                        fix="write source: {kind: kafka|parquet|segments, ...}")
    kind = str(source_config.get("kind") or "").strip().lower()
    options = {str(k): v for k, v in source_config.items() if str(k) not in _CONFIG_KEYS and v is not None}
    if kind in SOURCE_OPTIONS:
        check_options(kind, options)
    if kind == "kafka":
        return _read_kafka(spark, options, str(source_config.get("reader") or "auto").lower(), report)
    if kind == "parquet":
        from offsets_audit.sources.parquet import read_parquet

        return read_parquet(spark, _required_path(source_config, kind), options)
    if kind == "segments":
        from offsets_audit.sources import segments_spark as ss

        path = _required_path(source_config, kind)
        text = _text_options(options)
        ranges = _plan_segments(path, text, report)
        text["plan"] = ss.plan_to_option(ranges)
        source, extra = (formats or {}).get("kafka-segments", (None, {}))
        if source is None:
            from offsets_audit.sources.segments_source import SegmentsDataSource as source
        if ss.planned_bytes(ranges) <= DRIVER_READ_MAX_BYTES:
            return _as_source_schema(_read_on_driver(spark, source, {**text, **extra, "path": path}))
        # Small segments are packed into about this many input partitions (one task each), not one per file:
        # four per core, so a core slowed by other work does not hold the stage up.
        text.setdefault("minPartitions", str(4 * default_parallelism(spark)))
        register(spark, source)
        df = spark.read.format(source.name()).options(**text, **extra).load(path)
        return _as_source_schema(df)
    raise UserError(f"source kind {source_config.get('kind')!r} is unknown",
                    fix="set source kind to kafka, parquet or segments")


#: Options each source kind understands, as a user writes them under ``source.options`` (matched without
#: regard to case, as Spark matches reader options). ``kafka.*`` keys are the Kafka consumer's own settings.
SOURCE_OPTIONS: dict[str, tuple[str, ...]] = {
    "segments": ("partition", "topic", "segmentNames", "maxBytesPerPartition", "rowsPerBatch",
                 "maxFilesPerTrigger", "maxBytesPerTrigger"),
    # Spark's Parquet reader options that make sense for a dump.
    "parquet": ("verifyRowGroups",  # ours (sources.parquet): read every row group before Spark? auto|true|false
                "mergeSchema", "recursiveFileLookup", "pathGlobFilter", "modifiedBefore", "modifiedAfter",
                "datetimeRebaseMode", "int96RebaseMode",
                # Spark's file stream source (run --incremental over a dump)
                "maxFilesPerTrigger", "latestFirst", "maxFileAge", "cleanSource", "sourceArchiveDir"),
    # Spark's Kafka source options plus the kafka-python reader's own.
    "kafka": ("subscribe", "assign", "subscribePattern", "startingOffsets", "endingOffsets",
              "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingTimestamp", "endingTimestamp",
              "startingOffsetsByTimestampStrategy", "failOnDataLoss", "minPartitions", "maxRecordsPerPartition",
              "includeHeaders", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
              "kafkaConsumer.pollTimeoutMs", "groupIdPrefix", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
              "maxTriggerDelay", "fetchRetries", "retryBackoffMs", "pollTimeoutMs", "rowsPerBatch",
              "isolation.level"),
}

#: Allowed values of enumerated options (lower-case option name -> values, compared without regard to case).
OPTION_CHOICES: dict[str, tuple[str, ...]] = {
    "kafka.security.protocol": ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
    "kafka.sasl.mechanism": ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"),
    "kafka.isolation.level": ("read_committed", "read_uncommitted"),
    "isolation.level": ("read_committed", "read_uncommitted"),
    "segmentnames": ("kafka", "any"),
    "verifyrowgroups": ("auto", "true", "false"),
}

#: Kafka consumer settings (``kafka.<name>``) known to Kafka's ``ConsumerConfig``: a misspelt one would be passed
#: to the consumer and ignored with a log warning, so it is refused here with the nearest valid name.
KAFKA_CONSUMER_CONFIGS = (
    "bootstrap.servers", "client.dns.lookup", "client.id", "client.rack", "connections.max.idle.ms",
    "default.api.timeout.ms", "fetch.max.bytes", "fetch.max.wait.ms", "fetch.min.bytes", "isolation.level",
    "max.partition.fetch.bytes", "max.poll.records", "metadata.max.age.ms", "receive.buffer.bytes",
    "reconnect.backoff.max.ms", "reconnect.backoff.ms", "request.timeout.ms", "retry.backoff.ms",
    "retry.backoff.max.ms", "send.buffer.bytes", "check.crcs", "security.protocol",
    "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms", "metadata.recovery.strategy",
    "sasl.mechanism", "sasl.jaas.config", "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.client.callback.handler.class",
    "sasl.login.callback.handler.class", "sasl.login.class", "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms", "sasl.login.refresh.buffer.seconds", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter", "sasl.login.retry.backoff.max.ms",
    "sasl.login.retry.backoff.ms", "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "ssl.protocol", "ssl.enabled.protocols",
    "ssl.provider", "ssl.cipher.suites", "ssl.endpoint.identification.algorithm", "ssl.key.password",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.secure.random.implementation", "ssl.engine.factory.class",
    # librdkafka-style names the kafka-python reader also maps (see sources.kafka._RENAMED)
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "sasl.username", "sasl.password",
)


def check_options(kind: str, options: dict) -> None:
    """Refuse an option ``kind``'s source does not know, or an enumerated option's unknown value, with the
    nearest valid name (a ``UserError``: one line, exit 2, before any Spark work)."""
    import difflib

    from offsets_audit.errors import UserError

    known = {name.lower(): name for name in SOURCE_OPTIONS[kind]}
    consumer = {f"kafka.{name}" for name in KAFKA_CONSUMER_CONFIGS}
    for key, value in options.items():
        lowered = str(key).lower()
        if kind == "kafka" and lowered.startswith("kafka."):
            if lowered not in consumer:
                hint = difflib.get_close_matches(lowered, sorted(consumer), n=1)
                raise UserError(f"source.options: '{key}' is not a Kafka consumer setting",
                                fix=f"did you mean '{hint[0]}'?" if hint else
                                "see Kafka's consumer configs; kafka.<name> passes <name> to the consumer")
        elif lowered not in known:
            names = sorted(known.values()) + (["kafka.<consumer setting>"] if kind == "kafka" else [])
            hint = difflib.get_close_matches(lowered, list(known), n=1, cutoff=0.6)
            raise UserError(f"source.options: '{key}' is not an option of the {kind} source",
                            fix=f"did you mean '{known[hint[0]]}'?" if hint else f"valid options: {', '.join(names)}")
        choices = OPTION_CHOICES.get(lowered)
        if choices is not None and value is not None:
            text = option_text(value)
            if text.lower() not in {c.lower() for c in choices}:
                hint = difflib.get_close_matches(text.upper(), [c.upper() for c in choices], n=1, cutoff=0.6)
                nearest = next((c for c in choices if hint and c.upper() == hint[0]), None)
                raise UserError(f"source.options: '{key}' is {text!r}",
                                fix=(f"did you mean '{nearest}'? " if nearest else "") + f"use one of: {', '.join(choices)}")
        if kind == "segments" and lowered in ("partition", "maxbytesperpartition", "rowsperbatch",
                                              "maxfilespertrigger", "maxbytespertrigger"):
            minimum = 0 if lowered == "partition" else 1
            try:
                number = int(option_text(value))
            except ValueError:
                raise UserError(f"source.options: '{key}' is {value!r}, not a whole number",
                                fix=f"write a whole number >= {minimum}") from None
            if number < minimum:
                raise UserError(f"source.options: '{key}' is {number}", fix=f"write a whole number >= {minimum}")


#: Log segments of at most this many bytes in all are read and decoded by the driver, with the reader a task would
#: run, and handed to Spark as one Arrow table (``_read_on_driver``). Below it the Python Data Source's planning
#: (its schema and input partitions, each asked of a Python worker) and the read's own Python worker cost more than
#: the read itself: a CI gate's dump, a test's history. Larger logs are read by tasks.
DRIVER_READ_MAX_BYTES = 8 * 1024 * 1024


def _read_on_driver(spark, source, options: dict):
    """The rows ``spark.read.format(source.name()).options(**options).load()`` gives, read here by ``source``'s own
    reader (every input partition in plan order) and handed to Spark with the source's schema."""
    import pyarrow as pa

    data_source = source({str(k).lower(): str(v) for k, v in options.items()})
    schema = data_source.schema()
    reader = data_source.reader(schema)
    batches = [batch for partition in reader.partitions() for batch in reader.read(partition)]
    if not batches or not sum(batch.num_rows for batch in batches):
        return spark.createDataFrame([], schema)
    return spark.createDataFrame(pa.Table.from_batches(batches), schema)


def _plan_segments(path: str, options: dict, report: dict | None) -> list:
    """Plan the segment read on the driver (pure Python): files, byte ranges (``segments_spark.SegmentRange``),
    overlap check; say what was skipped."""
    import sys

    from offsets_audit.sources import segments_spark as ss

    lowered = {k.lower(): v for k, v in options.items()}
    partition = lowered.get("partition")
    ranges, scan = ss.plan(
        path, topic=str(lowered.get("topic", ss.DEFAULT_TOPIC)), names=str(lowered.get("segmentnames", "kafka")).lower(),
        partition=None if partition in (None, "") else int(partition),
        max_bytes=int(lowered.get("maxbytesperpartition", ss.DEFAULT_MAX_BYTES_PER_PARTITION)))
    notes = list(scan.notes)
    if scan.skipped:
        shown = ", ".join(p for p, _ in scan.skipped[:3]) + (f" and {len(scan.skipped) - 3} more"
                                                             if len(scan.skipped) > 3 else "")
        notes.insert(0, f"skipped {len(scan.skipped)} *.log file{'s' if len(scan.skipped) > 1 else ''} not named as "
                        f"Kafka names segments (20-digit base offset + .log): {shown}; set "
                        "source.options.segmentNames: any to read them")
    for note in notes:
        print(f"offsets-audit: note: {note}", file=sys.stderr)
    if report is not None:
        report["files_read"] = len(scan.files)
        report["skipped_files"] = [{"path": p, "reason": why} for p, why in scan.skipped]
        report["notes"] = notes
    return ranges


def preflight(source_config) -> int | None:
    """Everything about the input that can be checked without Spark, before a session is started: the path,
    the options, segment names and overlaps, Parquet footers. Raises a ``UserError`` (one line, exit 2).

    Returns the bytes the read will take where the driver knows them (the planned segment ranges, a local dump's
    files), else None (a live source, a remote path): what ``spark_session.get_spark`` sizes a local session by."""
    import io
    import contextlib

    kind = str(source_config.get("kind") or "").strip().lower()
    options = {str(k): v for k, v in source_config.items() if str(k) not in _CONFIG_KEYS and v is not None}
    if kind in SOURCE_OPTIONS:
        check_options(kind, options)
    if kind == "segments":
        from offsets_audit.sources.segments_spark import planned_bytes

        with contextlib.redirect_stderr(io.StringIO()):  # read() says what it skips; say it once
            return planned_bytes(_plan_segments(_required_path(source_config, kind), _text_options(options), None))
    if kind == "parquet":
        from offsets_audit.sources.parquet import check_parquet_files, local_dump_bytes, row_group_check

        path = _required_path(source_config, kind)
        check_parquet_files(path, row_groups=row_group_check(options))
        return local_dump_bytes(path)
    if kind == "kafka":
        from offsets_audit.sources.kafka import parse_options

        # The options' values too (offsets, numbers, JAAS text), not only their names: a read that can only read
        # nothing (startingOffsets latest) stops here, not after Spark has started. Nothing is asked of the cluster.
        parse_options({k: v for k, v in options.items() if str(k).lower() not in ("reader", "maxoffsetspertrigger")})
    return None


def _as_source_schema(df):
    from offsets_audit.sources.schema import as_source_schema  # imports pyspark: only when a read is planned

    return as_source_schema(df)


def spark_kafka_available(spark) -> bool:
    """Whether Spark's own ``kafka`` source is on the session's classpath (``spark_api.has_data_source``)."""
    return has_data_source(spark, "kafka")


def _read_kafka(spark, options: dict, reader: str, report: dict | None = None):
    """Spark's own ``kafka`` source where the session has it (or ``reader: spark``), else the ``kafka-python`` Data
    Source with the same options (``reader: kafka-python`` forces it); a note says which read the topic."""
    import sys

    from offsets_audit.errors import UserError

    if reader not in ("auto", "spark", "kafka-python"):
        raise UserError(f"kafka reader {reader!r} is unknown", fix="set reader to auto, spark or kafka-python")
    df, why = None, ""
    if reader == "spark" or (reader == "auto" and spark_kafka_available(spark)):
        df = _read_spark_kafka(spark, options)
        if df is None and reader == "spark":
            raise UserError("Spark's kafka source cannot read an internal topic on this session",
                            fix=f"let the session set {CONSUMER_OFFSET_READER}=true, or set source.reader: kafka-python")
        why = " (Spark's kafka source cannot read an internal topic on this session)"
    elif reader == "auto":
        why = (" (Spark's kafka source is not on the session's classpath: hand Spark "
               f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark.version} to use it)")
    if df is not None:
        note = "read with Spark's kafka source"
    else:
        note = "read with the kafka-python source" + why
        df = _read_kafka_python(spark, options)
    print(f"offsets-audit: note: {note}", file=sys.stderr)
    if report is not None:
        report["reader"] = "spark" if note.startswith("read with Spark") else "kafka-python"
        report.setdefault("notes", []).append(note)
    return df


#: Spark's Admin-based offset reader (its default since 3.4) leaves internal topics out of every subscription and
#: assignment (``ConsumerStrategy.retrieveAllPartitions`` keeps only topics whose ``TopicDescription.isInternal`` is
#: false), so it finds no partition of ``__consumer_offsets``; its consumer-based reader, given the partitions, reads
#: them. A runtime SQL setting, read when a Kafka relation or stream is planned.
CONSUMER_OFFSET_READER = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
#: Options that choose the topics or the offsets: replaced by the assignment and offsets resolved on the driver.
_WHERE_OPTIONS = ("subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets",
                  "startingoffsetsbytimestamp", "endingoffsetsbytimestamp", "startingtimestamp", "endingtimestamp",
                  "startingoffsetsbytimestampstrategy")


def spark_kafka_options(spark, options: dict, *, stream: bool = False) -> dict | None:
    """Options for Spark's ``kafka`` source that read what ``options`` ask, as the ``kafka-python`` reader reads it.

    The topics and offsets are resolved once on the driver with the same parser and consumer settings as the
    ``kafka-python`` reader (``sources.kafka.resolve_offsets``: ``startingOffsets``/``endingOffsets`` in every form,
    ``isolation.level``, the ``kafka.*`` security settings) and handed to Spark as an ``assign`` of the partitions
    with their offsets (no ``endingOffsets`` for a ``stream``): both readers read one snapshot, and no consumer
    group is created on the cluster being audited. Spark's reader gets ``isolation.level`` as
    ``kafka.isolation.level``, every other ``kafka.*`` setting and ``maxRecordsPerPartition``/``minPartitions`` as
    they are. An internal topic needs Spark's consumer-based offset reader (``CONSUMER_OFFSET_READER``), set on the
    session; None when the session refuses that setting (a restricted Spark Connect server)."""
    import sys

    from offsets_audit.sources.kafka import parse_options, pinned_options, resolve_offsets

    text = _text_options(options)
    lowered = {k.lower(): k for k in text}
    spark_options = {k: v for k, v in text.items()
                     if k.lower() not in _PYTHON_ONLY_OPTIONS and k.lower() not in _WHERE_OPTIONS}
    if "kafka.isolation.level" not in lowered:
        spark_options["kafka.isolation.level"] = str(text.get(lowered.get("isolation.level", ""), "read_committed"))
    if "fetchretries" in lowered and "fetchoffset.numretries" not in lowered:
        spark_options["fetchOffset.numRetries"] = str(text[lowered["fetchretries"]])
    bounds = resolve_offsets(parse_options(text))
    spark_options = pinned_options(spark_options, bounds)
    if stream:  # a stream reads on from where it is, batch after batch
        del spark_options["endingOffsets"]
    if any(topic.startswith("__") for topic, _ in bounds):
        try:
            spark.conf.set(CONSUMER_OFFSET_READER, "true")
        except Exception as error:  # noqa: BLE001 - a server that does not let a client set it
            print(f"offsets-audit: note: this session refuses {CONSUMER_OFFSET_READER}, without which Spark's kafka "
                  f"source reads no internal topic ({str(error).splitlines()[0][:200]})", file=sys.stderr)
            return None
    return spark_options


def _read_spark_kafka(spark, options: dict):
    """Spark's built-in Kafka source with the audit's defaults (``__consumer_offsets``, read_committed); None when
    the session cannot read the topic with it (``spark_kafka_options``)."""
    spark_options = spark_kafka_options(spark, options)
    if spark_options is None:
        return None
    df = spark.read.format("kafka").options(**spark_options).load()
    from offsets_audit.sources.schema import KAFKA_COLUMNS

    return _as_source_schema(df.select(*KAFKA_COLUMNS))


def _read_kafka_python(spark, options: dict):
    """The kafka-python data source, with offsets resolved here on the driver: the read is one snapshot, and a
    broker that cannot be reached fails now with its one-line message rather than inside a Spark task."""
    from offsets_audit.sources.kafka import parse_options, pinned_options, resolve_offsets

    options = _text_options(options)
    pinned = pinned_options(options, resolve_offsets(parse_options(options)))
    register(spark)
    return spark.read.format("kafka-python").options(**pinned).load()
