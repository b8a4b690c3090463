"""UniformAssignor ("uniform"): every golden case, plus the rules it is built from.

The golden scenarios feed each step's Java output maps back in as the next step's current assignment. In a few
homogeneous steps a member holds two topics that share a bucket of that map, and which one keeps its partitions
under the quota depends on the map's insertion history, which the sorted JSON does not carry. The golden
comparison therefore replays every scenario from step 0 with ``uniform.assign_chained``, as the generator did.
"""

from __future__ import annotations

import json
import re

import pytest

from golden_files import GOLDEN, open_golden
from offsets_audit.assignors import run, uniform

TOPIC_A = "f10of4il9cKFRFbGz3l8RQ"
TOPIC_B = "-JP2nvddCDAXoiB0nt0jqQ"
MISSING = "AAAAAAAAAAAAAAAAAAAAAA"

with open_golden(GOLDEN / "assignors" / "uniform.jsonl") as _handle:
    CASES = [json.loads(line) for line in _handle if line.strip()]
CASES_BY_ID = {c["case_id"]: c for c in CASES}

# Steps whose input alone does not fix the Java order of a current assignment (see the module docstring).
HISTORY_DEPENDENT_ORDER = {
    "uniform-20260822-1-step3",
    "uniform-20260822-3-step1",
    "uniform-20260822-3-step3",
    "uniform-20260822-13-step2",
    "uniform-20260822-18-step1",
}

_STEP = re.compile(r"^(?P<scenario>.*)-step(?P<step>\d+)$")
_replayed: dict = {}


def replay(case_id: str) -> tuple:
    """``assign_chained`` of ``case_id`` fed the Java-ordered output of its scenario's previous step (memoised)."""
    if case_id not in _replayed:
        match = _STEP.match(case_id)
        step = int(match["step"])
        carried = replay(f"{match['scenario']}-step{step - 1}")[1] if step > 0 else None
        _replayed[case_id] = uniform.assign_chained(CASES_BY_ID[case_id]["input"], carried)
    return _replayed[case_id]


@pytest.mark.parametrize("case_id", list(CASES_BY_ID))
def test_golden_case_matches_kafka_when_steps_are_chained(case_id):
    assert replay(case_id)[0] == CASES_BY_ID[case_id]["expected"]


@pytest.mark.parametrize("case_id", [c for c in CASES_BY_ID if c not in HISTORY_DEPENDENT_ORDER])
def test_golden_case_matches_kafka_from_its_input_alone(case_id):
    assert run("uniform", CASES_BY_ID[case_id]["input"]) == CASES_BY_ID[case_id]["expected"]


# The vectorised path builds its result in uniform/_kernel.c when that is built (pip install) and with numpy
# otherwise (the --py-files zip on Spark executors, a machine without a C compiler): both must give Kafka's answer.
RESULT_BUILDERS = ["kernel", "numpy"]


def _use_result_builder(monkeypatch, builder):
    from offsets_audit.assignors.uniform import vectorised

    if builder == "kernel" and vectorised._KERNEL is None:
        pytest.skip("the compiled kernel is not built in this install (pip install -e . builds it)")
    if builder == "numpy":
        monkeypatch.setattr(vectorised, "_KERNEL", None)


@pytest.mark.parametrize("builder", RESULT_BUILDERS)
def test_golden_cases_match_kafka_on_the_vectorised_path(builder, monkeypatch):
    monkeypatch.setattr(uniform, "VECTORISE_FROM_PARTITIONS", 0)
    _use_result_builder(monkeypatch, builder)
    cases = [CASES_BY_ID[c] for c in CASES_BY_ID if c not in HISTORY_DEPENDENT_ORDER]
    assert [c["case_id"] for c in cases if run("uniform", c["input"]) != c["expected"]] == []


@pytest.mark.parametrize("case_id", sorted(HISTORY_DEPENDENT_ORDER))
def test_history_dependent_cases_differ_without_the_carried_order(case_id):
    """Keeps the list above honest: these really need the previous step's Java order."""
    assert run("uniform", CASES_BY_ID[case_id]["input"]) != CASES_BY_ID[case_id]["expected"]


def test_chained_output_without_history_is_the_plain_result():
    for case in CASES:
        if case["step"] == 0:
            assert uniform.assign_chained(case["input"])[0] == run("uniform", case["input"])


def test_chained_java_order_holds_the_same_partitions_as_the_result():
    for case_id in CASES_BY_ID:
        result, java_order = replay(case_id)
        if result["error"] is None:
            assert {m: {t: sorted(p) for t, p in a.items()} for m, a in java_order.items()} == result["members"]


def member(member_id, topics, current=None, instance_id=None):
    return {"member_id": member_id, "instance_id": instance_id, "rack_id": None,
            "subscribed_topic_names": list(topics), "subscribed_topic_ids": list(topics),
            "current_assignment": current or {}}


def case(members, subscription_type="HOMOGENEOUS", topics=((TOPIC_A, 6), (TOPIC_B, 3))):
    return {"subscription_type": subscription_type,
            "topics": [{"id": t, "name": f"topic-{i}", "partitions": n, "partition_racks": None}
                       for i, (t, n) in enumerate(topics)],
            "members": members, "assignable_partitions": None}


def sizes(result):
    return sorted(sum(len(p) for p in topics.values()) for topics in result["members"].values())


def test_homogeneous_balances_within_one_partition():
    result = run("uniform", case([member(m, [TOPIC_A, TOPIC_B]) for m in "abcd"]))
    assert sizes(result) == [2, 2, 2, 3]


def test_homogeneous_keeps_owned_partitions_up_to_quota():
    result = run("uniform", case([member("a", [TOPIC_A], {TOPIC_A: [0, 1, 2, 3, 4, 5]}), member("b", [TOPIC_A])],
                                 topics=((TOPIC_A, 6),)))
    assert result["members"]["a"] == {TOPIC_A: [0, 1, 2]}
    assert result["members"]["b"] == {TOPIC_A: [3, 4, 5]}


def test_kafka_3_x_gives_the_extra_partition_to_the_first_member_it_iterates():
    """A member joins two owners of two partitions each (4 partitions, 3 members: one gets 2). Kafka 3.x's builder
    gives the extra slot to whoever comes first, here the empty joiner, so both owners give one up; 4.0 and later
    let the joiner pass it on to the first owner."""
    members = [member("new", [TOPIC_A]), member("a", [TOPIC_A], {TOPIC_A: [0, 1]}),
               member("b", [TOPIC_A], {TOPIC_A: [2, 3]})]
    newer = run("uniform", case(members, topics=((TOPIC_A, 4),)))
    older = run("uniform", dict(case(members, topics=((TOPIC_A, 4),)), **{uniform.BEFORE_4_0: True}))
    assert newer["members"] == {"new": {TOPIC_A: [3]}, "a": {TOPIC_A: [0, 1]}, "b": {TOPIC_A: [2]}}
    assert older["members"] == {"new": {TOPIC_A: [1, 3]}, "a": {TOPIC_A: [0]}, "b": {TOPIC_A: [2]}}


def test_homogeneous_drops_topics_no_longer_subscribed():
    result = run("uniform", case([member("a", [TOPIC_A], {TOPIC_B: [0], TOPIC_A: [1]})], topics=((TOPIC_A, 2), (TOPIC_B, 1))))
    assert result["members"] == {"a": {TOPIC_A: [0, 1]}}


def test_heterogeneous_gives_each_topic_to_its_subscribers_only():
    result = run("uniform", case([member("a", [TOPIC_A]), member("b", [TOPIC_A, TOPIC_B])], "HETEROGENEOUS"))
    assert TOPIC_B not in result["members"]["a"]
    assert sizes(result) == [4, 5]


def test_heterogeneous_moves_partitions_from_most_to_least_loaded():
    current = {TOPIC_A: [0, 1, 2, 3, 4, 5]}
    result = run("uniform", case([member("a", [TOPIC_A, TOPIC_B], current), member("b", [TOPIC_A])],
                                 "HETEROGENEOUS"))
    assert sizes(result) == [4, 5]
    assert result["members"]["a"][TOPIC_B] == [0, 1, 2]


@pytest.mark.parametrize("subscription_type", ["HOMOGENEOUS", "HETEROGENEOUS"])
def test_subscription_to_missing_topic_id_fails_the_assignment(subscription_type):
    result = run("uniform", case([member("a", [MISSING])], subscription_type))
    assert result == {"error": "PartitionAssignorException",
                      "message": f"Members are subscribed to topic {MISSING} which doesn't exist in the topic metadata."}


def test_no_subscribed_topics_gives_no_member_assignments():
    assert run("uniform", case([member("a", []), member("b", [])])) == {"error": None, "members": {}}


def test_empty_group_gets_empty_assignment():
    assert run("uniform", case([])) == {"error": None, "members": {}}


def _random_group(rng, subscription_type):
    """A random group: topics of 0-40 partitions, members owning random partitions of random topics (some
    topics unsubscribed, deleted or shrunk, so revocation paths run)."""
    import base64

    topics = [(base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("="), rng.randint(0, 40))
              for _ in range(rng.randint(1, 12))]
    deleted = base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("=")
    ids = [t for t, _ in topics]
    shared = rng.sample(ids, rng.randint(1, len(ids)))
    owner: dict = {}
    members = []
    for m in range(rng.randint(1, 30)):
        chosen = shared if subscription_type == "HOMOGENEOUS" else rng.sample(ids, rng.randint(1, len(ids)))
        current: dict = {}
        for topic_id, count in topics + [(deleted, 5)]:
            for p in range(count):
                if (topic_id, p) not in owner and rng.random() < 0.3:
                    owner[(topic_id, p)] = m
                    current.setdefault(topic_id, []).append(p)
        for partitions in current.values():
            rng.shuffle(partitions)
        members.append(member(f"member-{m}-{rng.randrange(10**6)}", chosen, current))
    return case(members, subscription_type, topics)


@pytest.mark.parametrize("builder", RESULT_BUILDERS)
@pytest.mark.parametrize("subscription_type", ["HOMOGENEOUS", "HETEROGENEOUS"])
def test_vectorised_run_equals_reference_builders(subscription_type, builder, monkeypatch):
    import random

    from offsets_audit.assignors.common import assignment_result, parse_group_spec

    monkeypatch.setattr(uniform, "VECTORISE_FROM_PARTITIONS", 0)
    _use_result_builder(monkeypatch, builder)
    rng = random.Random(20260822)
    for _ in range(300):
        group_input = _random_group(rng, subscription_type)
        try:
            expected = assignment_result(uniform.assign(parse_group_spec(group_input)))
        except Exception as exc:  # Kafka's exceptions are results, as run() reports them
            expected = {"error": exc.java_name, "message": exc.message}
        assert run("uniform", group_input) == expected


def test_compiled_result_equals_numpy_result_with_member_and_topic_order(monkeypatch):
    """Random owner arrays (empty topics, unowned partitions, members owning nothing): the kernel's result equals
    numpy's, including the order of members and of each member's topics."""
    import random

    import numpy as np

    from offsets_audit.assignors.uniform import vectorised

    if vectorised._KERNEL is None:
        pytest.skip("the compiled kernel is not built in this install (pip install -e . builds it)")
    for seed in range(60):
        rng = random.Random(seed)
        counts = [rng.choice([0, 1, 3, 50]) for _ in range(rng.randint(1, 20))]
        layout = vectorised._Partitions([f"topic-{t}" for t in range(len(counts))], counts)
        member_ids = [f"member-{m}" for m in range(rng.randint(1, 40))]
        layout.owners[:] = np.array([rng.randrange(-1, len(member_ids)) for _ in range(len(layout.owners))],
                                    dtype=np.int64)
        compiled = layout.result(member_ids)
        monkeypatch.setattr(vectorised, "_KERNEL", None)
        python = layout.result(member_ids)
        monkeypatch.undo()
        assert compiled == python, f"seed {seed}"
        assert [(m, list(a)) for m, a in compiled["members"].items()] == \
            [(m, list(a)) for m, a in python["members"].items()], f"seed {seed}"


def test_compiled_result_rejects_an_owner_outside_the_members():
    import numpy as np

    from offsets_audit.assignors.uniform import vectorised

    if vectorised._KERNEL is None:
        pytest.skip("the compiled kernel is not built in this install (pip install -e . builds it)")
    with pytest.raises(ValueError, match="not a member index"):
        vectorised._KERNEL.result(np.array([0, 2], dtype=np.int64), np.array([0, 2], dtype=np.int64), ["t"], ["m"])


@pytest.mark.parametrize("subscription_type", ["HOMOGENEOUS", "HETEROGENEOUS"])
@pytest.mark.parametrize("current", [
    pytest.param([{TOPIC_A: [0, 1]}, {TOPIC_A: [1, 2]}], id="partition-claimed-twice"),
    pytest.param([{TOPIC_A: [0, 9]}, {}], id="partition-out-of-range"),
    pytest.param([{TOPIC_A: (0, 1)}, {TOPIC_B: [2]}], id="partitions-as-a-tuple"),
    pytest.param([{TOPIC_A: [0, 1], TOPIC_B: [0]}, {TOPIC_B: [2, 1]}], id="plain"),
])
def test_compiled_claim_answers_as_the_python_paths(monkeypatch, subscription_type, current):
    """The kernel's claim of the current assignments: a partition claimed twice or out of range sends the group to
    the reference builders, input it does not model to numpy; either way the result is the Python paths' own."""
    from offsets_audit.assignors.uniform import vectorised

    if vectorised._KERNEL is None:
        pytest.skip("the compiled kernel is not built in this install (pip install -e . builds it)")
    monkeypatch.setattr(uniform, "VECTORISE_FROM_PARTITIONS", 0)
    group = case([member(f"m{i}", [TOPIC_A, TOPIC_B], held) for i, held in enumerate(current)] +
                 [member("m9", [TOPIC_A])], subscription_type)
    compiled = run("uniform", group)
    monkeypatch.setattr(vectorised, "_KERNEL", None)
    assert compiled == run("uniform", group)
    monkeypatch.setattr(uniform, "VECTORISE_FROM_PARTITIONS", 10**9)
    assert compiled == run("uniform", group)
