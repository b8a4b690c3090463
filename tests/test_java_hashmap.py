"""The step-by-step ``java.util.HashMap``/``HashSet``/``PriorityQueue`` model behind the order-exact
assignor ports. Expected orders were printed by OpenJDK 17 for the same operations."""

from __future__ import annotations

from offsets_audit.assignors.java_hashmap import JavaHashMap, JavaHashSet, JavaPriorityQueue, integer_hash


def test_put_appends_at_the_bucket_tail():
    m = JavaHashMap(integer_hash)
    for k in (33, 1, 17, 2):
        m.put(k, 0)
    assert m.keys() == [33, 1, 17, 2]


def test_compute_if_absent_inserts_at_the_bucket_head():
    m = JavaHashMap(integer_hash)
    for k in (33, 1, 17, 2):
        m.compute_if_absent(k, lambda: 0)
    assert m.keys() == [17, 1, 33, 2]


def test_compute_if_absent_resizes_lazily_on_the_next_call():
    m = JavaHashMap(integer_hash)
    for k in range(12):
        m.compute_if_absent(k, lambda: 0)
    m.compute_if_absent(17, lambda: 0)
    assert m.keys() == [0, 17, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    m.compute_if_absent(17, lambda: 0)
    assert m.keys() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 17]


def test_constructor_capacity_rounds_up_to_a_power_of_two():
    s = JavaHashSet(integer_hash, 2)
    for k in (5, 3, 9, 1):
        s.add(k)
    assert s.keys() == [9, 1, 3, 5]


def test_long_bucket_in_a_small_table_resizes_instead_of_treeifying():
    s = JavaHashSet(integer_hash)
    for k in range(9):
        s.add(k * 16)
    assert s.keys() == [0, 32, 64, 96, 128, 16, 48, 80, 112]
    assert s.tree_bins == 0


def test_remove_keeps_the_order_of_the_others():
    s = JavaHashSet.copy_of([3, 19, 35, 4], integer_hash)
    s.remove(19)
    assert s.keys() == [3, 35, 4]


def test_priority_queue_polls_equal_elements_in_heap_order():
    queue = JavaPriorityQueue(lambda a, b: (a[0] > b[0]) - (a[0] < b[0]), [(0, "x"), (0, "y"), (0, "z"), (0, "w")])
    assert [queue.poll()[1] for _ in range(4)] == ["x", "w", "z", "y"]
    assert queue.poll() is None


def test_vectorised_string_hashes_equal_string_hash_code():
    """``java_string_hashes`` (numpy, used for member ids of large groups) against the per-string loop, over
    ASCII, BMP and supplementary characters (two UTF-16 units each) and the empty string."""
    import random
    import string

    from offsets_audit.assignors.java_order import java_string_hash, java_string_hashes

    rng = random.Random(14)
    alphabet = string.ascii_letters + string.digits + "-_\u00e9\uff21\U0001f600"
    strings = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(2000)]
    assert java_string_hashes(strings) == [java_string_hash(s) for s in strings]
