"""Kafka's server-side ``UniformAssignor`` ("uniform", KIP-848 default), re-implemented bit-exact.

Two builders, chosen by the group's subscription type:

* homogeneous (``UniformHomogeneousAssignmentBuilder``): every member gets ``total // members`` partitions and
  ``total % members`` of them one more. Members keep what they own up to their quota (stickiness), in member
  iteration order; the extra slots go to members that already fill them, or to the last members that must take
  one. Freed and never-assigned partitions are then handed out in order.
* heterogeneous (``UniformHeterogeneousAssignmentBuilder``): partitions of topics a member no longer subscribes to
  are revoked, unassigned partitions go to the least loaded subscriber topic by topic (topics ordered by
  partitions per subscriber), then partitions move from the most to the least loaded subscribers of each topic
  until no move improves balance (at most 16 rounds over the topics).

Tie-breaks follow Kafka's iteration orders: the member ``HashMap`` (``GroupSpec.member_ids``), the ``HashSet`` of
subscribed topic ids and each member's current assignment ``HashMap<Uuid, HashSet<Integer>>``, reproduced with
``java_order``. This snapshot of the assignor is not rack-aware.

The homogeneous builder keeps a member's partitions topic by topic in its current assignment's iteration order,
so when two of its topics share a bucket of that map, which one is kept depends on the order they were inserted.
:func:`assign` (and ``assignors.run("uniform", ...)``) takes the order of ``current_assignment`` in the input as
that insertion order: the order of the topics in the ``ConsumerGroupTargetAssignmentMember`` record, which is
how a coordinator that loaded the group from ``__consumer_offsets`` rebuilds the map (``Assignment.fromRecord``:
a default ``HashMap`` and ``new HashSet<>(partitions)``), so the replay must carry the record's topic and
partition order. A live coordinator instead passes the previous run's output maps; :func:`assign_chained`
returns those maps' Java iteration order (modelled with ``java_hashmap``: deep copies, removals,
``computeIfAbsent`` at a bucket head) so consecutive runs can be chained exactly, as the golden scenarios were.
Those orders were checked against Kafka's own two builders compiled on OpenJDK 17 (every golden case and 800
random, partly chained, groups: identical topic and partition iteration order).

Two implementations give the same results: the reference builders (:func:`assign_homogeneous`,
:func:`assign_heterogeneous`), written against the Java step by step, and the vectorised path :func:`run` uses
for groups of :data:`VECTORISE_FROM_PARTITIONS` partitions or more. The latter keeps one numpy array of partition
owners; the heterogeneous hand-out of unassigned partitions is computed per topic as level-by-level filling of
the subscribers sorted by (size, index), members with the same subscription share one subscriber array, and
only topics whose subscribers differ by more than one partition run the sequential balancing loop.

Kafka 3.x (``before_4_0``) ran a variant of the homogeneous builder and an older heterogeneous builder, which 4.0
replaced (``heterogeneous_before_4_0``); only the reference path carries them.

Modules, one algorithm each as Kafka splits them: ``homogeneous`` and ``heterogeneous`` (the reference builders),
``vectorised`` (the numpy path), ``chained`` (order-exact chaining), ``orders`` (Java iteration orders of the
inputs). This front only picks the builder, as ``UniformAssignor.assign`` does.
"""

from __future__ import annotations

import gc
from typing import Mapping

from offsets_audit.assignors.common import HOMOGENEOUS, GroupSpec, assignment_result, parse_group_spec
from offsets_audit.assignors.uniform.chained import assign_chained
from offsets_audit.assignors.uniform.heterogeneous import MAX_ITERATION_COUNT, assign_heterogeneous
from offsets_audit.assignors.uniform.heterogeneous_before_4_0 import assign_heterogeneous_before_4_0
from offsets_audit.assignors.uniform.homogeneous import assign_homogeneous, current_iteration_order
from offsets_audit.assignors.uniform.orders import assignment_topic_order, integer_set_order, subscribed_topic_order
from offsets_audit.assignors.uniform.vectorised import fast_heterogeneous, fast_homogeneous

__all__ = [
    "BEFORE_4_0",
    "MAX_ITERATION_COUNT",
    "NAME",
    "VECTORISE_FROM_PARTITIONS",
    "assign",
    "assign_chained",
    "assign_heterogeneous",
    "assign_heterogeneous_before_4_0",
    "assign_homogeneous",
    "assignment_topic_order",
    "current_iteration_order",
    "integer_set_order",
    "run",
    "subscribed_topic_order",
]

NAME = "uniform"

#: Case-input key set (true) when the group's coordinator was Kafka 3.x (``inputs.consumer_case_input``'s caller
#: knows the brokers' version): its homogeneous builder hands out the extra partitions another way.
BEFORE_4_0 = "before_4_0"

# Below this many partitions in the metadata, numpy's per-call overhead outweighs what it saves and run() uses
# the reference builders (both give the same result).
VECTORISE_FROM_PARTITIONS = 1000


def assign(group: GroupSpec, *, before_4_0: bool = False) -> dict:
    """member id -> {topic id -> partitions}; raises ``PartitionAssignorException`` like Kafka. ``before_4_0``:
    Kafka 3.x's builders (:func:`assign_homogeneous`'s variant, :func:`assign_heterogeneous_before_4_0`)."""
    if not group.members:
        return {}
    if group.subscription_type == HOMOGENEOUS:
        return assign_homogeneous(group, before_4_0=before_4_0)
    if before_4_0:
        return assign_heterogeneous_before_4_0(group)
    return assign_heterogeneous(group)


def run(case_input: Mapping) -> dict:
    """``assignors.run("uniform", case_input)``: the golden ``expected`` layout, computed on numpy arrays of
    partition owners. Inputs the arrays cannot represent exactly (a partition claimed twice or out of range,
    a subscription to a missing topic) take the reference path :func:`assign`, which mirrors Kafka's maps.

    The cyclic garbage collector is paused for the call (it creates no cycles): on a large group the tens of
    thousands of result lists otherwise trigger full collections over the whole input, which cost more than the
    assignment itself.
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        return _run(case_input)
    finally:
        if paused:
            gc.enable()


def _run(case_input: Mapping) -> dict:
    group = parse_group_spec(case_input)
    if not group.members:
        return {"error": None, "members": {}}
    if case_input.get(BEFORE_4_0):
        # Kafka 3.x's coordinator: only the reference builder carries its homogeneous variant.
        return assignment_result(assign(group, before_4_0=True))
    if sum(topic.num_partitions for topic in group.topics.values()) < VECTORISE_FROM_PARTITIONS:
        return assignment_result(assign(group))
    fast = fast_homogeneous(group) if group.subscription_type == HOMOGENEOUS else fast_heterogeneous(group)
    if fast is not None:
        return fast
    return assignment_result(assign(group))
