"""``workers.fewer_collections``: the collector's thresholds raised for the body, the worker's own back after."""

from __future__ import annotations

import gc

import pytest

from offsets_audit.workers import GEN0_THRESHOLD, fewer_collections


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_the_body_runs_with_fewer_collections_and_the_thresholds_come_back(thresholds):
    with fewer_collections():
        assert gc.get_threshold() == (GEN0_THRESHOLD, 10, 10)
        with fewer_collections():  # nested: the inner end keeps the outer's
            pass
        assert gc.get_threshold() == (GEN0_THRESHOLD, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("a failing body")
    assert gc.get_threshold() == (700, 10, 10)


def test_a_generator_closed_early_gives_the_thresholds_back(thresholds):
    def batches():
        with fewer_collections():
            yield 1
            yield 2

    it = batches()
    assert next(it) == 1 and gc.get_threshold()[0] == GEN0_THRESHOLD
    it.close()  # what a consumer that stops early (a failed task) does
    assert gc.get_threshold() == (700, 10, 10)


def test_interleaved_bodies_give_the_thresholds_back_when_the_last_ends(thresholds):
    def body(n):
        with fewer_collections():
            yield from range(n)

    first, second = body(2), body(2)
    next(first)
    next(second)
    assert list(first) == [1] and gc.get_threshold()[0] == GEN0_THRESHOLD  # the second is still open
    assert list(second) == [1]
    assert gc.get_threshold() == (700, 10, 10)


def test_a_higher_threshold_is_never_lowered(thresholds):
    gc.set_threshold(10 * GEN0_THRESHOLD, 10, 10)
    with fewer_collections():
        assert gc.get_threshold()[0] == 10 * GEN0_THRESHOLD
    assert gc.get_threshold() == (10 * GEN0_THRESHOLD, 10, 10)


def test_cycles_are_still_collected(thresholds):
    class Node:
        pass

    with fewer_collections():
        a, b = Node(), Node()
        a.other, b.other = b, a
        del a, b
        assert gc.collect() >= 2
