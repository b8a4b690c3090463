"""Every audit rule with its default switch, severity and thresholds (mirrored in conf/defaults.yaml).

A rule id says the rule (``assignment_interval_violated``), never a number. ``rule_settings(rules)``
merges a user's ``rules:`` section over these defaults one rule at a time, so a config that only says
``rules: {rebalance_storm: {max_per_hour: 120}}`` keeps that rule's severity and switch; it gives every rule
id its typed ``RuleSettings`` (``offsets_audit.config.load_settings`` builds them once per run).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

from offsets_audit.errors import UserError
from offsets_audit.settings import RuleSettings

from ..model import SEVERITIES


@dataclass(frozen=True)
class RuleSpec:
    id: str
    family: str
    severity: str
    summary: str
    thresholds: dict = field(default_factory=dict)
    enabled: bool = True


RULES: dict[str, RuleSpec] = {}


def _rule(id: str, family: str, severity: str, summary: str, enabled: bool = True, **thresholds) -> None:
    RULES[id] = RuleSpec(id, family, severity, summary, thresholds, enabled)


# The rule table: one _rule(...) call per rule (it is data, read top to bottom).
# -- epochs (KIP-848 / KIP-1263) ---------------------------------------------------------------------
_rule("group_epoch_decreased", "epochs", "error",
      "a group's epoch went down without the group being deleted and re-created")
_rule("assignment_epoch_ahead_of_group_epoch", "epochs", "error",
      "a target assignment epoch is greater than the group epoch")
_rule("member_epoch_ahead_of_assignment_epoch", "epochs", "error",
      "a member epoch is greater than the group's target assignment epoch")
_rule("previous_member_epoch_inconsistent", "epochs", "error",
      "a member's previous epoch is above its epoch, or is not the epoch it had before")
_rule("partition_epoch_ahead_of_member_epoch", "epochs", "error",
      "a partition (or task) assignment epoch is greater than the owning member's epoch")
_rule("new_group_epoch_unexpected", "epochs", "warning",
      "a group created in the log did not start the way its Kafka version writes new groups")
# -- assignment batching (KIP-1263) ------------------------------------------------------------------
_rule("assignment_interval_violated", "batching", "error",
      "two target assignments of a group are closer than its assignment interval", tolerance_ms=0)
_rule("assignment_interval_overridden", "batching", "info",
      "target assignments come faster than the broker default and no group config says why (not known: no snapshot)")
_rule("assignment_timestamp_zero_unexpected", "batching", "warning",
      "a target assignment has AssignmentTimestamp 0 where Kafka >= 4.3 writes the real time")
_rule("assignment_timestamp_before_group_epoch_bump", "batching", "error",
      "a target assignment claims to be computed before the group-epoch bump it answers", tolerance_ms=0)
_rule("assignment_timestamp_after_record_time", "batching", "error",
      "a target assignment claims to be computed after the record that stores it was appended", tolerance_ms=0)
# -- ownership ---------------------------------------------------------------------------------------
_rule("partition_owned_twice", "ownership", "error",
      "a partition is owned (assigned or pending revocation) by two members of a consumer group at once")
_rule("streams_task_held_twice_in_process", "ownership", "error",
      "a streams task is held twice by members of one process, or active by two members")
_rule("assignment_outside_subscription", "ownership", "warning",
      "a reconciled member owns a partition of a topic it does not subscribe to", enabled=False)
_rule("warmup_task_not_promoted", "ownership", "warning",
      "a warm-up task that caught up stays a warm-up across a new target assignment",
      acceptable_recovery_lag=10000)
# -- assignor re-run ---------------------------------------------------------------------------------
_rule("assignor_mismatch", "assignor", "warning",
      "the recorded target assignment differs from a re-run of the group's assignor",
      min_confidence="medium")
# -- offsets -----------------------------------------------------------------------------------------
_rule("offset_committed_backwards", "offsets", "warning",
      "a committed offset moved backwards while the group had members", only_with_members=True)
_rule("offset_commit_by_non_owner", "offsets", "error",
      "an offset was committed for a partition no member of the (non-empty) consumer group owned")
_rule("transactional_offset_pending_too_long", "offsets", "warning",
      "a transactional offset commit stayed pending (no COMMIT/ABORT marker) too long",
      max_pending_ms=900000)
# -- classic groups ----------------------------------------------------------------------------------
_rule("classic_generation_decreased", "classic", "error",
      "a classic group's generation went down without the group being deleted")
_rule("classic_protocol_not_supported", "classic", "error",
      "a classic group with members has no protocol, or one a member did not list")
_rule("classic_leader_not_member", "classic", "error",
      "a classic group's leader is not one of its members")
_rule("classic_rebalance_rate_high", "classic", "warning",
      "a classic group went through too many generations in one hour", max_per_hour=30)
# -- churn -------------------------------------------------------------------------------------------
_rule("rebalance_storm", "churn", "warning",
      "a group's epoch was bumped too often within one hour", max_per_hour=60)
_rule("group_stuck_in_state", "churn", "warning",
      "a group stayed Assigning / Reconciling / NotReady longer than allowed",
      max_assigning_ms=300000, max_reconciling_ms=300000, max_not_ready_ms=300000)

# -- coordinator load (KIP-1263) --------------------------------------------------------------------
_rule("coordinator_partition_hogged", "coordinator", "warning",
      "one group took most of its __consumer_offsets partition's assignor time in a busy minute while other groups "
      "wait on that coordinator", min_group_share_pct=50, min_busy_ms=3000, min_neighbours=1)

FAMILIES = tuple(dict.fromkeys(spec.family for spec in RULES.values()))


def rule_settings(rules: Mapping[str, Any] | None, origin: str = "config") -> dict[str, RuleSettings]:
    """Every rule id's ``RuleSettings``: the defaults above under ``rules`` (a config's ``rules:`` section).

    A rule id or threshold the registry does not know, a severity that is not one, a threshold of another type
    than its default, or a negative one, is a ``UserError`` naming the key and the fix."""
    import difflib

    user = rules or {}
    for rule_id in user:
        if rule_id not in RULES:
            hint = difflib.get_close_matches(str(rule_id), list(RULES), n=1)
            raise UserError(f"{origin}: unknown rule 'rules.{rule_id}'",
                            fix=f"did you mean '{hint[0]}'?" if hint else "see docs/rules.md for the rule ids")
    out: dict[str, RuleSettings] = {}
    for rule_id, spec in RULES.items():
        given = user.get(rule_id) or {}
        if not isinstance(given, Mapping):
            raise UserError(f"{origin}: 'rules.{rule_id}' must be a mapping",
                            fix=f"e.g. rules: {{{rule_id}: {{enabled: false}}}}")
        settings = {"enabled": spec.enabled, "severity": spec.severity, **spec.thresholds}
        for key, value in given.items():
            if key not in settings:
                raise UserError(f"{origin}: unknown key 'rules.{rule_id}.{key}'",
                                fix=f"valid keys: {', '.join(sorted(settings))}")
            settings[key] = value
        if settings["severity"] not in SEVERITIES:
            raise UserError(f"{origin}: 'rules.{rule_id}.severity' is {settings['severity']!r}",
                            fix=f"use one of: {', '.join(SEVERITIES)}")
        if not isinstance(settings["enabled"], bool):
            raise UserError(f"{origin}: 'rules.{rule_id}.enabled' must be true or false, not "
                            f"{settings['enabled']!r}", fix="write true or false")
        thresholds = {name: settings[name] for name in spec.thresholds}
        for name, value in thresholds.items():
            _check_threshold(f"rules.{rule_id}.{name}", spec.thresholds[name], value, origin)
        out[rule_id] = RuleSettings(enabled=settings["enabled"], severity=settings["severity"],
                                    thresholds=thresholds)
    return out


def _check_threshold(dotted: str, default: Any, value: Any, origin: str) -> None:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise UserError(f"{origin}: '{dotted}' must be true or false, not {value!r}", fix="write true or false")
    elif isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{origin}: '{dotted}' must be a whole number, not {value!r}",
                            fix=f"e.g. {dotted.rsplit('.', 1)[-1]}: {default}")
        if value < 0:
            raise UserError(f"{origin}: '{dotted}' is {value}, a negative threshold", fix="give 0 or more")
    elif isinstance(default, str) and not isinstance(value, str):
        raise UserError(f"{origin}: '{dotted}' must be text, not {value!r}", fix=f"e.g. {dotted.rsplit('.', 1)[-1]}: {default}")


@lru_cache(maxsize=1)
def default_rule_settings() -> Mapping[str, RuleSettings]:
    """Every rule at its registry default (what a ``Settings()`` without rules audits with)."""
    return rule_settings(None)
