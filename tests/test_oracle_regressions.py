"""Kafka-made histories that once showed a difference, each cut down to the one group that showed it.

Every case in tests/oracle_regressions/ is a scenario for the oracle (``about`` says what it holds); all of them are
played through Kafka's coordinator in one JVM and must show no difference at all (``oracle_diff``), and each must
still hold what made it a case (the assertions per case below), so a case cannot pass by no longer testing anything.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import oracle
import oracle_diff
from offsets_audit.replay import replay_records
from offsets_audit.sources.segments import read_segment

CASES = Path(__file__).resolve().parent / "oracle_regressions"
VERSION = "4.4.0"


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    out = tmp_path_factory.mktemp("regressions")
    scenarios = []
    for partition, path in enumerate(sorted(CASES.glob("*.json"))):
        scenario = json.loads(path.read_text())
        scenarios.append(dict(scenario, partition=partition))
    oracle.write_histories(scenarios, out, version=VERSION)
    topics = [t for s in scenarios for t in oracle.load_state(out, s["name"])["topics"]]
    (out / "topics.json").write_text(json.dumps({"topics": topics}))
    loaded = {s["partition"]: s for s in oracle.replay_folder(
        out, out / "topics.json", epochs=True, version=VERSION,
        broker_configs={str(s["partition"]): s.get("broker") or {} for s in scenarios})}
    results = {}
    for s in scenarios:
        records = list(read_segment(out / f"__consumer_offsets-{s['partition']}" / "00000000000000000000.log",
                                    s["partition"]))
        state = oracle.load_state(out, s["name"])
        result = replay_records(records)
        differences = oracle_diff.replay_differences(records, loaded[s["partition"]])
        differences += oracle_diff.audit_differences(result, s, state, VERSION)
        results[s["name"]] = (differences, oracle_diff.audit_rows(result, s, state, VERSION))
    return results


def _kept(name: str):
    """A kept Kafka-made segment (tests/oracle_regressions/kept/NAME) replayed and audited: it must show no
    difference; returns the replay and its assignor re-run rows."""
    folder = CASES / "kept" / name
    scenario = json.loads((folder / "scenario.json").read_text())
    state = json.loads((folder / "state.json").read_text())
    result = replay_records(list(read_segment(folder / "00000000000000000000.log", scenario["partition"])))
    assert oracle_diff.audit_differences(result, scenario, state, VERSION) == []
    return result, oracle_diff.audit_rows(result, scenario, state, VERSION)[2]


@pytest.mark.parametrize("name", sorted(p.stem for p in CASES.glob("*.json")))
def test_no_difference(played, name):
    assert played[name][0] == []


def _group(rows, suffix):
    return [r for r in rows if str(r["group_id"]).endswith(suffix)]


def test_an_upgrades_first_target_is_the_classic_assignment_not_rerun(played):
    _, (_, _, reruns) = played["upgrade-first-target"]
    rows = _group(reruns, ".classic-1")
    assert rows[0]["kind"] == "not_rerun" and "carried over" in rows[0]["notes"]
    assert [r["match"] for r in rows[1:] if r["kind"] == "rerun"] and all(
        r["match"] for r in rows[1:] if r["kind"] == "rerun")


def test_a_downgrade_is_group_converted_by_the_member_that_left(played):
    _, (_, rebalances, _) = played["downgrade-cause"]
    classic = [r for r in rebalances if r["group_type"] == "classic" and "group_converted" in r["causes"]]
    assert classic and "member_left" in classic[0]["causes"]
    culprits = classic[0]["cause_members"]
    assert [m["causes"] for m in culprits] == [["member_left", "group_converted"]]
    assert not culprits[0]["member_id"].startswith("h00077.classic-0-c")   # the KIP-848 member, not a classic one


def test_members_naming_no_assignor_get_the_brokers_first(played):
    _, (_, _, reruns) = played["broker-default-range"]
    rows = [r for r in reruns if r["kind"] == "rerun"]
    assert rows and {r["assignor"] for r in rows} == {"range"} and all(r["match"] for r in rows)


def test_a_classic_subscription_change_is_subscription_changed(played):
    _, (_, rebalances, _) = played["classic-subscription-change"]
    assert any(r["group_type"] == "classic" and r["causes"] == ["subscription_changed"] for r in rebalances)


def test_tied_server_assignors_bump_as_assignor_changed(played):
    _, (_, rebalances, reruns) = played["tied-server-assignors"]
    assert sum(r["causes"] == ["assignor_changed"] for r in rebalances) >= 3
    assert {r["assignor"] for r in reruns if r["kind"] == "rerun"} >= {"range", "uniform"}


def test_a_classic_leader_rejoining_with_nothing_changed_is_leader_rejoined(played):
    _, (_, rebalances, _) = played["classic-leader-rejoin"]
    rows = [r for r in rebalances if r["causes"] == ["leader_rejoined"]]
    assert rows and all(len(r["cause_members"]) == 1 for r in rows)


def test_tied_assignors_make_a_real_storm_blamed_on_the_tie(played):
    _, (findings, rebalances, _) = played["tied-assignors-storm"]
    storms = [f for f in findings if f.rule == "rebalance_storm"]
    assert len(storms) == 1 and oracle_diff.storm_is_kafkas(storms[0].rule, storms[0].details)
    assert "group.remote.assignor" in storms[0].message
    culprits = [c["client"] for c in storms[0].details["top_culprits"][:2]]
    assert sorted(c.split("@")[0] for c in culprits) == ["h01590.classic-1-u0", "h01590.classic-1-u1"]
    tie = [r for r in rebalances if r["causes"] == ["assignor_changed"]]
    assert len(tie) > 50 and all({m["client_id"] for m in r["cause_members"]}
                                 == {"h01590.classic-1-u0", "h01590.classic-1-u1"} for r in tie)


def test_a_conversions_members_are_in_the_order_kafkas_table_iterates():
    """A Kafka-made segment kept whole: the converted members' records come in the new table's iteration order."""
    from offsets_audit.assignors.inputs import timeline_slot

    result, reruns = _kept("classic-conversion-order")
    assert [r["match"] for r in reruns if r["kind"] == "rerun"] == [True]
    # still a case: two converted members share a slot of the four-slot table the conversion fills
    first = result.groups["h01484x014.classic-1"].target_assignment_rows()[0]
    slots = [timeline_slot(m["member_id"], 4) for m in first["members"]]
    assert len(set(slots)) < len(slots)


def test_after_a_conversion_the_group_iterates_the_table_its_records_rebuild():
    """A Kafka-made segment kept whole: the heartbeat that converts a classic group computes its target over the
    table ``fromClassicGroup`` filled, but the group that stays is the one the records are replayed into; its
    table holds the converted members in record order, so the next target (a member joining, members preferring
    range and uniform equally: Kafka ran uniform) iterates three members sharing a slot the other way round."""
    from offsets_audit.assignors.inputs import timeline_slot

    result, reruns = _kept("conversion-replayed-table")
    reruns = [r for r in reruns if r["kind"] == "rerun"]
    assert all(r["match"] for r in reruns)
    assert [r["assignor"] for r in reruns if r["assignment_epoch"] == 9] == ["uniform"]
    # still a case: three converted members share a slot of the eight-slot table the later targets iterate
    converted = result.groups["h00076.classic-1"].target_assignment_rows()[0]
    slots = [timeline_slot(m["member_id"], 8) for m in converted["members"]]
    assert max(slots.count(s) for s in slots) >= 3


def test_a_conversion_row_holding_its_joiner_is_followed_in_the_replayed_tables_order():
    """A Kafka-made segment kept whole: a KIP-848 consumer's heartbeat converts a classic group, so the conversion's
    target already holds that joiner; the next target (another joiner) iterates the table the conversion's records
    are replayed into, where the converted members sharing a slot come in record order."""
    from offsets_audit.assignors.inputs import timeline_slot

    result, reruns = _kept("conversion-joiner-row")
    group = "h00997.classic-3"
    reruns = [r for r in reruns if r["kind"] == "rerun" and r["group_id"] == group]
    assert [r["assignor"] for r in reruns if r["assignment_epoch"] == 5] == ["uniform"]
    assert all(r["match"] for r in reruns)
    # still a case: the conversion's row holds a KIP-848 joiner beside converted members sharing a slot
    rows = result.groups[group].target_assignment_rows()
    conversion = next(r for r in rows if r["assignment_epoch"] == 4)
    slots = [timeline_slot(m["member_id"], 8) for m in conversion["members"]]
    assert max(slots.count(s) for s in slots) >= 2
    assert any(not m["member_id"].startswith(group) for m in conversion["members"])


def test_a_regex_joiner_after_its_regexs_last_user_left_keeps_the_stored_heterogeneous_type():
    """A Kafka-made segment kept whole: a member subscribed by a regular expression leaves (its tombstone, then the
    expression's), and a member joins with that expression, unresolved, before anything else: its heartbeat takes
    the group's stored subscription type, computed when the leaver's tombstone was replayed, while the expression's
    topics still counted (HETEROGENEOUS), so the joiner is given nothing."""
    result, reruns = _kept("regex-joiner-after-last-user")
    group = "h02072.consumer-1"
    reruns = [r for r in reruns if r["kind"] == "rerun" and r["group_id"] == group]
    assert reruns and all(r["match"] for r in reruns)
    # still a case: the group's first target at epoch 4 gives the unresolved joiner nothing
    row = next(r for r in result.groups[group].target_assignment_rows() if r["assignment_epoch"] == 4)
    assert any(not parts for parts in row["target"].values())



def test_a_target_the_epoch_already_called_for_uses_the_stored_subscription_type():
    """A Kafka-made segment kept whole (h06416 of the oracle bench): group consumer-0's static member with a
    regular expression times out; its records and then the expression's tombstone bump the epoch to 8, and a later
    heartbeat (no bump) computes the target with the subscription type ConsumerGroup stored at the member's
    removal, which still counts the expression's topics: heterogeneous, though the two members left subscribe
    alike. Recomputed as homogeneous, one partition went to the other member."""
    result, reruns = _kept("uniform-rerun-one-partition-moved")
    reruns = [r for r in reruns if r["kind"] == "rerun" and r["group_id"] == "h06416.consumer-0"]
    assert reruns and all(r["match"] for r in reruns)
    rows = {r["assignment_epoch"]: r for r in result.groups["h06416.consumer-0"].target_assignment_rows()}
    assert list(rows[8]["counted_regular_expressions"]) == ["h06416\\.t[02468]"]
    assert not rows[8]["resolved_regular_expressions"] and rows[7]["counted_regular_expressions"] is None


def test_a_first_target_whose_member_joined_in_its_append_is_rerun_from_the_log():
    """A Kafka-made segment kept whole (h00242 of the second oracle bench): the pure re-run of consumer-0's
    epoch 4 matched, the one through Spark did not (6 partitions placed differently), because the Spark fold did
    not see each record's Kafka batch and so not which members joined in the target's append. The Spark edge now
    carries ``batch_base_offset`` to the fold (tests/test_oracle.py compares its target rows with the pure ones)."""
    result, reruns = _kept("spark-batch-facts-h00242")
    rows = [r for r in reruns if r["kind"] == "rerun" and r["group_id"] == "h00242.consumer-0"]
    assert rows and all(r["match"] for r in rows)
    targets = result.groups["h00242.consumer-0"].target_assignment_rows()
    assert all(m["joined_in_batch"] is not None for r in targets for m in r["members"])
