"""A streaming query whose Python worker was late to connect back (a busy machine outlasts Spark's fixed wait) is
resumed from its checkpoint, a few times at most; any other failure is raised as it is."""
from __future__ import annotations

import pytest

from offsets_audit.replay import streaming


class _Query:
    def __init__(self, error):
        self.error = error

    def awaitTermination(self):
        if self.error is not None:
            raise self.error


class _Writer:
    """Stands in for ``df.writeStream...``: each ``start`` is one start of the query, failing as told."""

    def __init__(self, errors):
        self.errors = list(errors)
        self.starts = 0

    def __getattr__(self, name):
        return lambda *args, **kwargs: self

    def start(self):
        self.starts += 1
        return _Query(self.errors.pop(0) if self.errors else None)


class _Frame:
    def __init__(self, writer):
        self.writeStream = writer


LATE = RuntimeError("[STREAM_FAILED] terminated with exception: Python worker failed to connect back.")


def test_a_late_worker_resumes_the_query(tmp_path, capsys):
    writer = _Writer([LATE])
    assert streaming._run_query(_Frame(writer), str(tmp_path), None) == []
    assert writer.starts == 2
    assert "resuming the query from its checkpoint" in capsys.readouterr().err


def test_a_worker_late_every_time_is_raised(tmp_path):
    writer = _Writer([LATE] * streaming.RESUME_ATTEMPTS)
    with pytest.raises(RuntimeError, match="connect back"):
        streaming._run_query(_Frame(writer), str(tmp_path), None)
    assert writer.starts == streaming.RESUME_ATTEMPTS


def test_another_failure_is_not_retried(tmp_path):
    writer = _Writer([RuntimeError("assertion failed")])
    with pytest.raises(RuntimeError, match="assertion failed"):
        streaming._run_query(_Frame(writer), str(tmp_path), None)
    assert writer.starts == 1
