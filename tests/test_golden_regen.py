"""The golden assignor vectors are Kafka's answers, remade by the oracle: scenarios whose later steps depend on
the order Kafka's maps iterate (the previous step's output carried into the next) come out as stored."""
from __future__ import annotations

import golden_regen

HISTORY_DEPENDENT = ("uniform-20260822-3", "uniform-20260822-13")


def test_uniform_scenarios_that_depend_on_the_carried_order_are_remade_as_stored():
    cases, changed = golden_regen.regenerate("uniform", golden_regen.kafka_jars.DEFAULT_KAFKA_VERSION,
                                             HISTORY_DEPENDENT)
    assert {c["case_id"].rsplit("-step", 1)[0] for c in cases} == set(HISTORY_DEPENDENT)
    assert changed == []
