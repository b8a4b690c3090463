"""Audit rules, one module per family; ``registry`` lists every rule id with its defaults."""
from .batching import BatchingRules
from .churn import ChurnRules
from .classic import ClassicRules
from .epochs import EpochRules
from .offsets import OffsetRules
from .ownership import OwnershipRules
from .registry import RULES, rule_settings

#: Families that walk group events (the assignor family reads the assignor_audit table instead).
FAMILY_CLASSES = (EpochRules, BatchingRules, OwnershipRules, OffsetRules, ClassicRules, ChurnRules)

__all__ = ["RULES", "rule_settings", "FAMILY_CLASSES"]
