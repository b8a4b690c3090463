"""Kafka's server-side assignors, re-run over replayed group state.

``run(assignor, case_input)`` takes one case in the layout of ``golden/assignors/<assignor>.jsonl`` (``input``)
and returns that file's ``expected`` layout: ``{"error": None, "members": {member: {topic: [partitions]}}}``, or
``{"error": "<Java exception simple name>", "message": ...}`` where Kafka's assignor throws.

Built-in names (the ``name()`` Kafka's assignors report): ``uniform`` (``UniformAssignor``), ``range``
(``RangeAssignor``), ``simple`` (share groups' ``SimpleAssignor``), ``sticky`` / ``streams_sticky`` /
``streams-sticky`` (streams' ``StickyTaskAssignor``; the last is the golden files' ``assignor`` field) and
``lag_aware``. Names are matched case-insensitively and ``-`` equals ``_``. Each lives in its own module, imported only when first used. A module
provides either ``run(case_input) -> dict`` (the full result layout) or ``assign(group_spec) -> dict`` over the
parsed ``common.GroupSpec`` (member id -> topic id -> partitions).

Own assignors plug in with ``register_assignor(name, fn)``: ``fn(case_input)`` returns the result layout, or
just the ``members`` mapping.
"""

from __future__ import annotations

import importlib
from typing import Callable, Mapping

from offsets_audit.errors import UserError

_BUILTIN_MODULES = {
    "uniform": "uniform",
    "range": "range",
    "simple": "simple",
    "sticky": "streams_sticky",
    "streams_sticky": "streams_sticky",
    "streams-sticky": "streams_sticky",
    "lag_aware": "lag_aware",
}

#: Built-in modules whose result depends on the Java iteration order of the current assignment and that
#: offer ``assign_chained(case_input, carried) -> (result, java_order)``.
ORDER_SENSITIVE = frozenset({"uniform", "simple"})
#: Built-in modules whose result does not depend on the current assignment at all.
ORDER_INSENSITIVE = frozenset({"range"})


def is_chainable(name: str) -> bool:
    """Whether ``name`` is a built-in with ``assign_chained`` (its result follows the current assignment's order)."""
    builtin = None if name in _registered or ":" in name else builtin_name(name)
    return builtin is not None and _BUILTIN_MODULES[builtin] in ORDER_SENSITIVE


def is_order_insensitive(name: str) -> bool:
    """Whether ``name`` is a built-in whose result ignores the current assignment (``range``)."""
    builtin = None if name in _registered else builtin_name(name)
    return builtin is not None and _BUILTIN_MODULES[builtin] in ORDER_INSENSITIVE

_registered: dict[str, Callable[[dict], Mapping]] = {}


def known_assignors() -> list[str]:
    """Every name ``run`` accepts: the built-ins, then registered ones."""
    return list(_BUILTIN_MODULES) + [name for name in _registered if name not in _BUILTIN_MODULES]


def register_assignor(name: str, fn: Callable[[dict], Mapping]) -> None:
    """Make ``run(name, ...)`` call ``fn(case_input)``; a registered name shadows a built-in one."""
    if not isinstance(name, str) or not name:
        raise UserError(f"assignor name {name!r} is not a non-empty string", fix="register it under a plain name")
    if not callable(fn):
        raise UserError(f"assignor {name!r} was registered with {fn!r}, which is not callable",
                        fix="pass a function taking the case input dict")
    _registered[name] = fn


def register_plugin(name: str, spec: str, allow_sharing: bool = False) -> None:
    """Load ``spec`` (``"package.module:attribute"``) and make ``run(name, case_input)`` call it."""
    from offsets_audit.assignors.plugin import load_assignor, run_plugin

    fn = load_assignor(spec)
    register_assignor(name, lambda case_input: run_plugin(fn, case_input, spec, allow_sharing))


def unregister_assignor(name: str) -> None:
    """Forget a registered assignor (built-ins stay)."""
    _registered.pop(name, None)


def is_registered(name: str) -> bool:
    """Whether ``register_assignor`` made ``name`` known."""
    return name in _registered


def builtin_name(name: str) -> str | None:
    """The built-in module key for ``name`` (``Streams-Sticky`` -> ``streams-sticky``), or ``None``."""
    if name in _BUILTIN_MODULES:
        return name
    folded = name.strip().lower() if isinstance(name, str) else None
    if folded in _BUILTIN_MODULES:
        return folded
    folded = folded.replace("-", "_") if folded else folded
    return folded if folded in _BUILTIN_MODULES else None


def preload(name: str) -> None:
    """Import a built-in assignor's module now (each loads on first use): a timed run then times the assignment,
    not the import. Plug-ins and registered assignors are left as they are."""
    builtin = None if name in _registered or ":" in name else builtin_name(name)
    if builtin is not None:
        _builtin(builtin)


def _builtin(name: str):
    try:
        return importlib.import_module(f"{__name__}.{_BUILTIN_MODULES[name]}")
    except ModuleNotFoundError as exc:
        raise UserError(f"assignor {name!r} is not available in this installation ({exc})",
                        fix=f"use one of {', '.join(known_assignors())}") from exc


def _as_result(value: Mapping) -> dict:
    if isinstance(value, Mapping) and "error" in value:
        return dict(value)
    return {"error": None, "members": dict(value)}


def run(assignor: str, case_input: dict) -> dict:
    """Run one assignor on one case; Kafka's exceptions become the ``{"error", "message"}`` result."""
    fn = _registered.get(assignor)
    if fn is not None:
        return _as_result(fn(case_input))
    if ":" in assignor:  # a user's plug-in named by "package.module:attribute" (config assignors.custom)
        from offsets_audit.assignors.plugin import load_assignor, run_plugin

        return run_plugin(load_assignor(assignor), case_input, name=assignor)
    builtin = builtin_name(assignor)
    if builtin is None:
        raise UserError(f"unknown assignor {assignor!r}", fix=f"use one of {', '.join(known_assignors())}")
    module = _builtin(builtin)
    try:
        if hasattr(module, "run"):
            return _as_result(module.run(case_input))
        from offsets_audit.assignors.common import assignment_result, parse_group_spec

        return assignment_result(module.assign(parse_group_spec(case_input)))
    except Exception as exc:  # Kafka's exceptions are results; anything else is a bug and propagates.
        java_name = getattr(exc, "java_name", None)
        if java_name is None:
            raise
        message = getattr(exc, "message", None)
        return {"error": java_name, "message": str(exc) if message is None else message}


def run_chained(assignor: str, case_input: dict, carried: Mapping | None = None) -> tuple[dict, dict | None]:
    """``run`` for a re-run that continues the previous one, the way the coordinator feeds its assignor.

    For an order-sensitive built-in (``ORDER_SENSITIVE``) this calls the module's ``assign_chained``:
    ``carried`` (the previous step's second value, member -> {topic -> partitions} in Java iteration order)
    becomes each member's current assignment where its content is what ``case_input`` says; otherwise, and
    without ``carried``, the input lists are taken as record order (a default ``HashMap`` filled in record
    order, ``new HashSet<>(partitions)``, as ``Assignment.fromRecord`` rebuilds it on load). Returns
    ``(result, java_order)``; ``java_order`` is ``None`` for assignors whose result ignores that order (or
    registered/plug-in ones, run as ``run`` does).
    """
    builtin = None if assignor in _registered or ":" in assignor else builtin_name(assignor)
    if builtin is None or _BUILTIN_MODULES[builtin] not in ORDER_SENSITIVE:
        return run(assignor, case_input), None
    module = _builtin(builtin)
    result, java_order = module.assign_chained(case_input, carried or None)
    return _as_result(result), (java_order if result.get("error") is None else None)
