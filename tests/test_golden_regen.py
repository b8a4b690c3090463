"""The golden data is Kafka's answers, remade by the oracle (tests/golden_regen.py): assignor scenarios whose later
steps depend on the order Kafka's maps iterate (the previous step's output carried into the next) come out as
stored, and the codec vectors and segments are what the suite's Kafka release reads, writes back and prints."""
from __future__ import annotations

import golden_regen
import pytest

HISTORY_DEPENDENT = ("uniform-20260822-3", "uniform-20260822-13")


def test_uniform_scenarios_that_depend_on_the_carried_order_are_remade_as_stored():
    cases, changed = golden_regen.regenerate("uniform", golden_regen.kafka_jars.DEFAULT_KAFKA_VERSION,
                                             HISTORY_DEPENDENT)
    assert {c["case_id"].rsplit("-step", 1)[0] for c in cases} == set(HISTORY_DEPENDENT)
    assert changed == []


def test_the_codec_vectors_and_segments_are_what_kafka_reads_writes_and_prints():
    """Every stored record and consumer protocol vector is what the suite's Kafka release makes of its bytes (the
    serde reads and writes them back unchanged, the generated converters and kafka-dump-log print the stored JSON),
    every stored topic and group hash is the one Kafka computes, and every record of the codec segments and of one
    history is what FileRecords reads and kafka-dump-log prints."""
    files = [p for p in golden_regen.expected_files()
             if p.parent.name == "segments" or p.name.startswith("history-simple-and-txn-commits")]
    assert len(files) == 8
    remade, changed = golden_regen.regenerate_codec(golden_regen.kafka_jars.DEFAULT_KAFKA_VERSION, True, files,
                                                    hashes=True)
    assert len(remade) == 3 + 2 + 8 and sum(map(len, remade.values())) > 800
    assert changed == []


@pytest.mark.full
def test_every_golden_segment_is_what_kafka_reads_and_prints():
    remade, changed = golden_regen.regenerate_codec(golden_regen.kafka_jars.DEFAULT_KAFKA_VERSION, False, None)
    assert len(remade) == len(golden_regen.expected_files()) > 50
    assert changed == []


def test_golden_histories_state_and_epochs_are_what_kafkas_loader_answers():
    """A golden history's state.json and epochs.jsonl, remade from its segment by the release's loader with the
    stored topics, clock and groups asked about, are the stored files to the byte: a consumer group's history, and
    one whose offsets expired by a timer after the last record (groups no longer listed, still asked about)."""
    states = golden_regen.history_files(["history-consumer-group", "history-simple-and-txn-commits"])
    remade, changed = golden_regen.regenerate_histories(golden_regen.kafka_jars.DEFAULT_KAFKA_VERSION, states)
    assert len(states) == 2 and len(remade) == 4
    assert changed == []


@pytest.mark.full
def test_every_golden_history_is_what_kafkas_loader_answers():
    states = golden_regen.history_files()
    remade, changed = golden_regen.regenerate_histories(golden_regen.kafka_jars.DEFAULT_KAFKA_VERSION, states)
    assert len(states) > 50
    assert [c for c in changed if c.rsplit("/", 1)[-1] not in golden_regen.KNOWN_HISTORIES] == []
