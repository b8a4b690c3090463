"""Audit: rules over the replay's events, rebalance latency, the HTML report and the CI gate.

Pure core: ``audit_group(events, config) -> (findings, rebalances)`` and ``summarize_latency``;
Spark edge: ``offsets_audit.audit.spark.audit(tables, config)``. Rules: docs/rules.md.
"""
from .engine import audit_events, audit_group
from .latency import summarize_latency
from .model import Finding
from .rules.assignor import assignor_findings
from .rules.registry import RULES, rule_settings

__all__ = ["audit_group", "audit_events", "summarize_latency", "assignor_findings", "Finding", "RULES",
           "rule_settings"]
