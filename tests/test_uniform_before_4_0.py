"""Kafka 3.x's uniform assignor (both builders) as the project re-runs it for a 3.x cluster, judged by Kafka 3.9.1.

``tests/kafka/before_4_0/UniformAssign.java`` runs Kafka 3.9.1's own ``UniformAssignor`` (its 3.x API, so it is a
single-file program on the 3.9.1 jars, outside the helpers compiled for every release). The default suite checks
the vendored answers in ``tests/kafka_3_9/uniform.jsonl`` (Kafka's output on random groups: members with the same
and with different subscriptions, sticky current assignments, and the inputs on which 3.x's builder throws);
the ``full`` test draws new groups and asks Kafka again. ``python tests/test_uniform_before_4_0.py`` rewrites the
vendored file.
"""

from __future__ import annotations

import base64
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from offsets_audit.assignors import run as run_assignor
from offsets_audit.assignors.uniform import BEFORE_4_0

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "kafka" / "before_4_0" / "UniformAssign.java"
VENDORED = HERE / "kafka_3_9" / "uniform.jsonl"
VERSION = "3.9.1"


def random_case(rng: random.Random, *, heterogeneous: bool, max_partitions: int, max_members: int) -> dict:
    """A uniform re-run's input: 2-5 topics, members subscribed to all (homogeneous) or to a random subset,
    most of them owning some partitions of their topics (and sometimes of a topic they left)."""
    topics = [{"id": base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("="), "name": f"t{i}",
               "partitions": rng.randint(1, max_partitions), "partition_racks": None}
              for i in range(rng.randint(2, 5))]
    owned: set = set()
    members = []
    for index in range(rng.randint(2, max_members)):
        subscribed = rng.sample(topics, rng.randint(1, len(topics))) if heterogeneous else topics
        current: dict = {}
        if rng.random() < 0.7:
            for topic in subscribed + ([rng.choice(topics)] if rng.random() < 0.3 else []):
                for partition in range(topic["partitions"]):
                    if (topic["id"], partition) not in owned and rng.random() < 0.4:
                        owned.add((topic["id"], partition))
                        current.setdefault(topic["id"], []).append(partition)
        members.append({"member_id": f"m{rng.randint(0, 10**6)}-{index}", "instance_id": None, "rack_id": None,
                        "subscribed_topic_names": [t["name"] for t in subscribed],
                        "subscribed_topic_ids": [t["id"] for t in subscribed], "current_assignment": current})
    return {"subscription_type": "HETEROGENEOUS" if heterogeneous else "HOMOGENEOUS", "topics": topics,
            "members": members, "assignable_partitions": None}


def random_cases(seed: int, count: int) -> list[dict]:
    rng = random.Random(seed)
    return [random_case(rng, heterogeneous=i % 4 != 3, max_partitions=8 if i % 2 else 20,
                        max_members=7 if i % 2 else 12) for i in range(count)]


def kafka_answers(cases: list[dict]) -> list[dict]:
    """Kafka 3.9.1's ``UniformAssignor`` on each case: ``{"error", "message", "members"}``."""
    import kafka_jars

    kafka_jars.kafka_libs(VERSION)
    libs = kafka_jars.kafka_home(VERSION) / "libs" / "*"
    stdin = "".join(json.dumps({"case_id": str(i), "input": case}) + "\n" for i, case in enumerate(cases))
    done = subprocess.run([kafka_jars._tool("java"), "-Xmx512m", "-cp", str(libs), str(PROGRAM)], input=stdin,
                          capture_output=True, text=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _layout(result: dict) -> tuple:
    members = {m: {t: sorted(p) for t, p in topics.items() if p} for m, topics in (result.get("members") or {}).items()}
    return result.get("error"), result.get("message") if result.get("error") else None, members


def _ours(case: dict) -> dict:
    return run_assignor("uniform", dict(case, **{BEFORE_4_0: True}))


def test_the_3_x_builders_give_what_kafka_3_9_1_gave():
    lines = [json.loads(line) for line in VENDORED.read_text().splitlines() if line.strip()]
    kinds = {line["input"]["subscription_type"] for line in lines}
    assert kinds == {"HOMOGENEOUS", "HETEROGENEOUS"} and any(line["expected"].get("error") for line in lines)
    for line in lines:
        assert _layout(_ours(line["input"])) == _layout(line["expected"]), line["case_id"]


@pytest.mark.full
def test_the_3_x_builders_agree_with_kafka_3_9_1_on_new_random_groups():
    cases = random_cases(random.randrange(2**32), 400)
    answers = kafka_answers(cases)
    assert len(answers) == len(cases)
    for case, answer in zip(cases, answers):
        assert _layout(_ours(case)) == _layout(answer), json.dumps(case)


def main() -> int:
    """Rewrite the vendored cases with Kafka 3.9.1's answers."""
    sys.path.insert(0, str(HERE))
    cases = random_cases(391, 48)
    answers = kafka_answers(cases)
    VENDORED.parent.mkdir(exist_ok=True)
    with VENDORED.open("w") as out:
        for i, (case, answer) in enumerate(zip(cases, answers)):
            expected = {"error": answer.get("error"), "message": answer.get("message"),
                        "members": answer.get("members") or {}}
            out.write(json.dumps({"case_id": f"uniform-3.9.1-{i}", "input": case, "expected": expected},
                                 separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
