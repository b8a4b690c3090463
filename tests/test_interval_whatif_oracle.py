"""The what-if judged by Kafka's coordinator at two intervals (the oracle, tests/oracle.py).

One churning consumer group (``interval_scenarios``) is written through Kafka's ``GroupCoordinatorShard`` twice,
with ``consumer.assignment.interval.ms`` 0 and 5000 and the same clients' steps. The what-if computed from the
interval-0 log alone must predict the interval-5 s log: its number of assignments, and its bumps' time to
assignment (p50, p95, max) within a tenth of a heartbeat interval; and the other way round. At its own interval
each log replays to its recorded computations exactly.
"""
from __future__ import annotations

import pytest

from interval_scenarios import BROKER_HEARTBEAT_MS, interval_histories
from offsets_audit.audit import interval_whatif as W
from offsets_audit.audit.latency import percentile

pytestmark = pytest.mark.slow

#: stated bounds: assignments within 2 (of about 50-90), time to assignment within a tenth of the heartbeat interval
RUNS_BOUND = 2
LATENCY_BOUND_MS = BROKER_HEARTBEAT_MS / 10


@pytest.fixture(scope="module")
def histories(tmp_path_factory):
    return interval_histories(tmp_path_factory.mktemp("intervals"), seed=5)


def _replay(history, interval, recorded):
    silent = W.silent_stretches(history, recorded)
    return W.replay(history, interval_ms=interval, heartbeat_interval_ms=BROKER_HEARTBEAT_MS, silent=silent)


def _summary(replayed):
    latencies = replayed.latencies()
    return replayed.runs, percentile(latencies, 0.5), percentile(latencies, 0.95), max(latencies)


def test_each_log_replays_to_its_recorded_computations(histories):
    for interval, history in histories.items():
        assert W.check_recorded(history, _replay(history, interval, interval)).matches, interval
    assert histories[0].bumps == histories[5000].bumps > 40


@pytest.mark.parametrize("known, predicted", [(0, 5000), (5000, 0)])
def test_what_if_from_one_interval_predicts_the_other(histories, known, predicted):
    forecast = _summary(_replay(histories[known], predicted, known))
    actual = _summary(_replay(histories[predicted], predicted, predicted))
    assert abs(forecast[0] - actual[0]) <= RUNS_BOUND, (forecast, actual)
    for got, want in zip(forecast[1:], actual[1:]):
        assert abs(got - want) <= LATENCY_BOUND_MS, (forecast, actual)
    if predicted > known:
        assert forecast[0] < len(histories[known].computations)   # fewer runs at the larger interval
