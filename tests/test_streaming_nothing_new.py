"""An incremental run does not start its two streaming queries when a segments source holds nothing past the offsets
their checkpoints committed (``streaming.nothing_past_committed``); anything else it cannot rule out starts them."""
from __future__ import annotations

import json
from pathlib import Path

from offsets_audit.replay import streaming
from offsets_audit.sources.segment_writer import encode_batch, segment_path
from offsets_audit.sources.segments_stream import SegmentsStreamReader


def _append(path: Path, base_offset: int, cut: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    batch = encode_batch([(b"k", b"v")], base_offset, 1_000 + base_offset)
    with open(path, "ab") as handle:
        handle.write(batch if cut is None else batch[:cut])


def _commit(checkpoint: Path, source: dict, batch: int, *, committed: bool = True) -> None:
    """What a query's checkpoint holds after micro-batch ``batch``: its offsets file, and its commit when
    ``committed``, in both queries' folders."""
    offset = SegmentsStreamReader({"path": source["path"]})._latest()
    for query in streaming.QUERIES:
        root = checkpoint / query
        (root / "offsets").mkdir(parents=True, exist_ok=True)
        (root / "commits").mkdir(parents=True, exist_ok=True)
        (root / "offsets" / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{json.dumps(offset)}')
        if committed:
            (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_the_queries_run_unless_the_source_holds_nothing_past_their_commits(tmp_path):
    logs, checkpoint = tmp_path / "logs", tmp_path / "checkpoint"
    source = {"kind": "segments", "path": str(logs)}
    logs.mkdir()
    _commit(checkpoint, source, 0)
    assert not streaming.nothing_past_committed(source, str(checkpoint)), "no file read yet: the query decides"
    first = segment_path(logs, 0)
    _append(first, 0)
    _append(segment_path(logs, 1), 0)
    assert not streaming.nothing_past_committed(source, str(checkpoint))

    _commit(checkpoint, source, 1)
    assert streaming.nothing_past_committed(source, str(checkpoint))
    assert not streaming.nothing_past_committed({**source, "kind": "parquet"}, str(checkpoint)), "not answered"

    _append(first, 1, cut=20)  # a batch still being written: the query would wait for it too
    assert streaming.nothing_past_committed(source, str(checkpoint))
    first.write_bytes(first.read_bytes()[:-20])
    _append(first, 1)  # a complete batch more
    assert not streaming.nothing_past_committed(source, str(checkpoint))

    _commit(checkpoint, source, 2, committed=False)  # planned, not committed: a restart runs it again
    assert not streaming.nothing_past_committed(source, str(checkpoint))
    _commit(checkpoint, source, 2)
    assert streaming.nothing_past_committed(source, str(checkpoint))

    _append(segment_path(logs, 0, base_offset=2), 2)  # rolled: a new active segment
    assert not streaming.nothing_past_committed(source, str(checkpoint))
    _commit(checkpoint, source, 3)
    assert streaming.nothing_past_committed(source, str(checkpoint))

    segment_path(logs, 1).unlink()  # a segment gone (retention): the query decides
    assert not streaming.nothing_past_committed(source, str(checkpoint))
    _commit(checkpoint, source, 4)
    assert streaming.nothing_past_committed(source, str(checkpoint))
    (checkpoint / "records" / "commits" / "4").write_text("v1\n")  # cut short: the started query refuses it
    assert not streaming.nothing_past_committed(source, str(checkpoint))
    _commit(checkpoint, source, 4)
    (checkpoint / "fold" / "offsets" / "4").write_text("v1\nnot an offset")
    assert not streaming.nothing_past_committed(source, str(checkpoint))


def test_a_run_with_nothing_past_the_commits_reads_nothing(tmp_path):
    """``incremental.bytes_to_read``: nothing for a run whose queries would find nothing (a local session started for
    it compiles with C1 only, ``spark_session.get_spark``), else at most the whole input's bytes."""
    from offsets_audit.config import load_settings
    from offsets_audit.incremental import bytes_to_read

    logs, checkpoint = tmp_path / "logs", tmp_path / "checkpoint"
    settings = load_settings(overrides={"source": {"kind": "segments", "path": str(logs)}})
    source = {"kind": "segments", "path": str(logs)}
    _append(segment_path(logs, 0), 0)
    assert bytes_to_read(settings, str(checkpoint), 1234) == 1234, "a new checkpoint reads the whole input"
    _commit(checkpoint, source, 0)
    assert bytes_to_read(settings, str(checkpoint), 1234) == 0
    _append(segment_path(logs, 0), 1)
    assert bytes_to_read(settings, str(checkpoint), 1234) == 1234
