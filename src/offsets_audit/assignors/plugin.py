"""Plug-in point for a user's own Python assignor, in the spirit of Kafka's pluggable assignors
(KIP-848 ``ConsumerGroupPartitionAssignor`` on the broker, KIP-924 ``TaskAssignor`` in Streams).

A plug-in receives a read-only description of the group -- :class:`GroupView` with its members
(subscriptions, racks, current assignment) and topics (partition count, replica racks) -- and returns
``{member_id: {topic_id: [partitions]}}``. It can be

* a function ``assign(group: GroupView) -> Mapping``,
* a class with an ``assign(self, group)`` method (instantiated without arguments), or
* any object with such an ``assign`` method,

named ``"package.module:attribute"`` for :func:`load_assignor`. The result is checked the way Kafka's
coordinator trusts its own assignors to behave -- every member exists, every topic exists and is
subscribed by that member, every partition is in range and assignable, and (for consumer groups) no
partition goes to two members -- and converted to the golden output layout
``{"error": None, "members": {member_id: {topic_id: [sorted partitions]}}}``. A plug-in that wants to
report a failure the way Kafka's assignors do raises :class:`PartitionAssignorError`; the result is
then ``{"error": "PartitionAssignorException", "message": ...}``.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

from offsets_audit.errors import UserError


class PartitionAssignorError(Exception):
    """Raised by a plug-in to fail the assignment like Kafka's ``PartitionAssignorException``."""


@dataclass(frozen=True)
class TopicView:
    """One topic as ``SubscribedTopicDescriber`` shows it."""

    topic_id: str
    name: str
    num_partitions: int
    partition_racks: tuple[frozenset[str], ...]

    def racks_for_partition(self, partition: int) -> frozenset[str]:
        return self.partition_racks[partition] if partition < len(self.partition_racks) else frozenset()


@dataclass(frozen=True)
class MemberView:
    """One member as ``GroupSpec.memberSubscription`` / ``memberAssignment`` show it."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_ids: frozenset[str]
    current_assignment: Mapping[str, frozenset[int]]


@dataclass(frozen=True)
class GroupView:
    """The read-only group a plug-in assigns: members in input order, topics by id."""

    subscription_type: str
    members: Mapping[str, MemberView]
    topics: Mapping[str, TopicView]
    assignable_partitions: Mapping[str, frozenset[int]] | None

    def topic_by_name(self, name: str) -> TopicView | None:
        for topic in self.topics.values():
            if topic.name == name:
                return topic
        return None

    def is_partition_assignable(self, topic_id: str, partition: int) -> bool:
        """``GroupSpec.isPartitionAssignable``: share groups may restrict partitions; others never do."""
        if self.assignable_partitions is None:
            return True
        return partition in self.assignable_partitions.get(topic_id, frozenset())

    def is_partition_assigned(self, topic_id: str, partition: int) -> bool:
        """``GroupSpec.isPartitionAssigned``: some member's current assignment holds the partition."""
        return any(partition in m.current_assignment.get(topic_id, ()) for m in self.members.values())


def group_view(case_input: Mapping[str, Any]) -> GroupView:
    """Build the read-only :class:`GroupView` of a golden-layout consumer/share input."""
    topics = {}
    for topic in case_input.get("topics", []):
        racks = topic.get("partition_racks") or []
        topics[topic["id"]] = TopicView(topic["id"], topic["name"], topic["partitions"],
                                        tuple(frozenset(r or ()) for r in racks))
    members = {}
    for member in case_input.get("members", []):
        current = {t: frozenset(ps) for t, ps in (member.get("current_assignment") or {}).items()}
        members[member["member_id"]] = MemberView(
            member["member_id"], member.get("instance_id"), member.get("rack_id"),
            tuple(member.get("subscribed_topic_names") or ()), frozenset(member.get("subscribed_topic_ids") or ()),
            MappingProxyType(current))
    assignable = case_input.get("assignable_partitions")
    return GroupView(case_input.get("subscription_type", "HOMOGENEOUS"), MappingProxyType(members),
                     MappingProxyType(topics),
                     None if assignable is None else MappingProxyType({t: frozenset(ps) for t, ps in assignable.items()}))


def as_assign_function(candidate: Any, name: str = "plug-in") -> Callable[[GroupView], Mapping]:
    """Turn a function, a class with ``assign`` or an object with ``assign`` into ``fn(group)``."""
    if inspect.isclass(candidate):
        try:
            candidate = candidate()
        except TypeError as exc:
            raise UserError(f"assignor class {name} cannot be created without arguments ({exc})",
                            fix="give it a constructor without required arguments, or pass an instance") from exc
    method = getattr(candidate, "assign", None)
    if callable(method):
        return method
    if callable(candidate):
        return candidate
    raise UserError(f"{name} is neither a function nor has an assign(group) method",
                    fix="point to a function assign(group) or a class with an assign(self, group) method")


def load_assignor(spec: str) -> Callable[[GroupView], Mapping]:
    """Import ``"package.module:attribute"`` (attribute may be dotted) and return ``fn(group)``."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise UserError(f"assignor plug-in {spec!r} is not of the form 'package.module:attribute'",
                        fix="name the module and the function or class, e.g. 'my_pkg.assignors:round_robin'")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"cannot import module {module_name!r} of assignor plug-in {spec!r} ({exc})",
                        fix="install the package or add its folder to PYTHONPATH") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise UserError(f"module {module_name!r} has no attribute {attribute!r} (assignor plug-in {spec!r})",
                            fix="check the name after the colon") from exc
    return as_assign_function(target, spec)


def validate_assignment(group: GroupView, assignment: Any, name: str = "plug-in",
                        allow_sharing: bool = False) -> dict[str, dict[str, list[int]]]:
    """Check a plug-in's result against the group and return it as sorted plain lists.

    Sharing a partition between members is only allowed with ``allow_sharing`` (share groups).
    """
    def fail(problem: str) -> UserError:
        return UserError(f"assignor {name} returned an invalid assignment: {problem}",
                         fix="return {member_id: {topic_id: [partitions]}} for members and subscribed topics of the group")

    if not isinstance(assignment, Mapping):
        raise fail(f"expected a mapping of member id to topics, got {type(assignment).__name__}")
    owners: dict[tuple[str, int], str] = {}
    result: dict[str, dict[str, list[int]]] = {member_id: {} for member_id in group.members}
    for member_id, topics in assignment.items():
        member = group.members.get(member_id)
        if member is None:
            raise fail(f"member {member_id!r} is not in the group")
        if not isinstance(topics, Mapping):
            raise fail(f"member {member_id!r} maps to {type(topics).__name__}, not to {{topic_id: [partitions]}}")
        for topic_id, partitions in topics.items():
            topic = group.topics.get(topic_id)
            if topic is None:
                raise fail(f"topic {topic_id!r} given to member {member_id!r} does not exist")
            if topic_id not in member.subscribed_topic_ids:
                raise fail(f"member {member_id!r} is not subscribed to topic {topic.name} ({topic_id})")
            seen: set[int] = set()
            for partition in _as_iterable(partitions, fail, member_id, topic_id):
                if isinstance(partition, bool) or not isinstance(partition, int):
                    raise fail(f"partition {partition!r} of topic {topic.name} for member {member_id!r} is not an int")
                if not 0 <= partition < topic.num_partitions:
                    raise fail(f"topic {topic.name} has no partition {partition} (member {member_id!r}; "
                               f"{topic.num_partitions} partitions)")
                if not group.is_partition_assignable(topic_id, partition):
                    raise fail(f"partition {topic.name}-{partition} is not assignable yet (member {member_id!r})")
                if partition in seen:
                    raise fail(f"partition {topic.name}-{partition} listed twice for member {member_id!r}")
                seen.add(partition)
                other = owners.setdefault((topic_id, partition), member_id)
                if other != member_id and not allow_sharing:
                    raise fail(f"partition {topic.name}-{partition} given to both {other!r} and {member_id!r}")
            if seen:
                result[member_id][topic_id] = sorted(seen)
    return result


def _as_iterable(partitions: Any, fail: Callable[[str], UserError], member_id: str, topic_id: str) -> Iterable:
    if isinstance(partitions, (str, bytes)) or not isinstance(partitions, Iterable):
        raise fail(f"partitions of topic {topic_id!r} for member {member_id!r} are not a list: {partitions!r}")
    return partitions


def run_plugin(assignor: Any, case_input: Mapping[str, Any], name: str | None = None,
               allow_sharing: bool = False) -> dict[str, Any]:
    """Run a plug-in (function, class or object, see module docstring) on a golden-layout input and
    return the golden output layout. Pass ``allow_sharing=True`` for share groups."""
    label = name if name else str(getattr(assignor, "__qualname__", repr(assignor)))
    fn = as_assign_function(assignor, label)
    group = group_view(case_input)
    try:
        assignment = fn(group)
    except PartitionAssignorError as exc:
        return {"error": "PartitionAssignorException", "message": str(exc)}
    return {"error": None, "members": validate_assignment(group, assignment, label, allow_sharing)}
