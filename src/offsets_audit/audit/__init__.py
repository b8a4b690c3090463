"""Audit: rules over the replay's events, rebalance latency, the HTML report and the CI gate.

Pure core: ``audit_group(events, settings) -> (findings, rebalances)``, ``summarize_latency`` and
``summarize_causes`` (every rebalance row carries ``causes`` / ``cause_members``, see ``causes.CAUSES``);
Spark edge: ``offsets_audit.audit.spark.audit(tables, assignor_audit, settings)`` (``settings``: the run's
``offsets_audit.settings.Settings``). Rules: docs/rules.md.
"""
from .causes import CAUSES, summarize_causes
from .engine import audit_events, audit_group
from .latency import summarize_latency
from .model import Finding
from .rules.assignor import assignor_findings
from .rules.registry import RULES, rule_settings

__all__ = ["audit_group", "audit_events", "summarize_latency", "summarize_causes", "CAUSES", "assignor_findings",
           "Finding", "RULES", "rule_settings"]
