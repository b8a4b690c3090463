"""Kafka's server-side assignors, re-run over replayed group state.

``run(assignor, case_input)`` takes one case in the layout of ``golden/assignors/<assignor>.jsonl`` (``input``)
and returns that file's ``expected`` layout: ``{"error": None, "members": {member: {topic: [partitions]}}}``, or
``{"error": "<Java exception simple name>", "message": ...}`` where Kafka's assignor throws.

Built-in names (the ``name()`` Kafka's assignors report): ``uniform`` (``UniformAssignor``), ``range``
(``RangeAssignor``), ``simple`` (share groups' ``SimpleAssignor``), ``sticky`` / ``streams_sticky`` (streams'
``StickyTaskAssignor``) and ``lag_aware``. Each lives in its own module, imported only when first used. A module
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
    "lag_aware": "lag_aware",
}

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
    if assignor not in _BUILTIN_MODULES:
        raise UserError(f"unknown assignor {assignor!r}", fix=f"use one of {', '.join(known_assignors())}")
    module = _builtin(assignor)
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
