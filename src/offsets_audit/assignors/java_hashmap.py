"""A step-by-step model of ``java.util.HashMap`` / ``HashSet`` for order-exact assignor ports.

Kafka's share and streams assignors mutate hash maps while iterating them, so their tie-breaks depend not
only on the final key set (which :func:`java_order.hashmap_order` covers) but on the history: the
constructor capacity, when a resize happens, and where a new node enters its bucket. This model keeps
the table explicitly:

* ``put`` / ``HashSet.add`` append the node at the *tail* of its bucket and resize *after* inserting when
  the size exceeds ``0.75 * capacity``;
* ``computeIfAbsent`` resizes *before* looking (when the size already exceeds the threshold) and inserts
  the new node at the *head* of its bucket;
* a bucket that grows past 8 nodes while the table is smaller than 64 triggers a resize instead of a
  tree bin (``treeifyBin``); real tree bins (table >= 64) are not modelled, only counted in
  ``tree_bins`` so a caller or test can notice;
* a resize splits every bucket keeping the relative order of its nodes;
* iteration walks buckets in index order.

Keys are plain Python values whose equality matches the Java ``equals``; ``hash_fn`` gives the Java
``hashCode`` of a key as an int (any width, taken modulo 2**32).

:class:`JavaPriorityQueue` is the same idea for ``java.util.PriorityQueue``: its binary-heap sift rules
decide which of several equal elements ``poll`` returns.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable, Iterator

from offsets_audit.assignors.java_order import java_string_hash

_MASK32 = 0xFFFFFFFF
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64
_DEFAULT_CAPACITY = 16


def integer_hash(value: int) -> int:
    """``Integer.hashCode()``: the value itself."""
    return value


def table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two >= ``capacity`` (1 for 0 or 1)."""
    n = 1
    while n < capacity:
        n <<= 1
    return n


def capacity_for_mappings(num_mappings: int) -> int:
    """The constructor argument Kafka's ``AssignorHelpers.newHashMap/newHashSet(n)`` passes:
    ``(int) (((n + 1) / 0.75f) + 1)``."""
    return int((num_mappings + 1) / 0.75 + 1)


def copy_constructor_capacity(size: int) -> int:
    """The capacity ``new HashSet<>(collection)`` asks for: ``max((int) (size / .75f) + 1, 16)``."""
    return max(int(size / 0.75) + 1, _DEFAULT_CAPACITY)


class JavaHashMap:
    """``java.util.HashMap`` with Java's bucket layout and resize policy (see module docstring)."""

    __slots__ = ("_hash_fn", "_table", "_initial", "_size", "_values", "tree_bins")

    def __init__(self, hash_fn: Callable[[Any], int] = java_string_hash, initial_capacity: int | None = None):
        self._hash_fn = hash_fn
        self._table: list[list] | None = None
        self._initial = _DEFAULT_CAPACITY if initial_capacity is None else table_size_for(initial_capacity)
        self._size = 0
        self._values: dict = {}
        self.tree_bins = 0

    # -- table mechanics -------------------------------------------------------------------------
    def _capacity(self) -> int:
        return len(self._table) if self._table is not None else 0

    def _threshold(self) -> int:
        if self._table is None:
            return self._initial
        return int(len(self._table) * 0.75)

    def _index(self, key: Hashable, capacity: int) -> int:
        h = self._hash_fn(key) & _MASK32
        return (h ^ (h >> 16)) & (capacity - 1)

    def _resize(self) -> None:
        if self._table is None:
            self._table = [[] for _ in range(self._initial)]
            return
        new_capacity = len(self._table) * 2
        new_table: list[list] = [[] for _ in range(new_capacity)]
        for bucket in self._table:
            for key in bucket:
                new_table[self._index(key, new_capacity)].append(key)
        self._table = new_table

    def _buckets(self) -> list[list]:
        """The bucket array, allocated on first use as ``HashMap`` allocates its table lazily."""
        table = self._table
        if table is None:
            table = self._table = [[] for _ in range(self._initial)]
        return table

    def _treeify_bin(self) -> None:
        if len(self._buckets()) < _MIN_TREEIFY_CAPACITY:
            self._resize()
        else:
            self.tree_bins += 1

    # -- Map operations ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._size

    def __contains__(self, key: Hashable) -> bool:
        return key in self._values

    def get(self, key: Hashable, default: Any = None) -> Any:
        return self._values.get(key, default)

    def __getitem__(self, key: Hashable) -> Any:
        return self._values[key]

    def put(self, key: Hashable, value: Any) -> None:
        """``HashMap.put``: replace in place, or append at the bucket's tail then maybe resize."""
        if key in self._values:
            self._values[key] = value
            return
        table = self._buckets()
        bucket = table[self._index(key, len(table))]
        nodes_before = len(bucket)
        bucket.append(key)
        self._values[key] = value
        if nodes_before >= _TREEIFY_THRESHOLD:
            self._treeify_bin()
        self._size += 1
        if self._size > self._threshold():
            self._resize()

    def __setitem__(self, key: Hashable, value: Any) -> None:
        self.put(key, value)

    def compute_if_absent(self, key: Hashable, factory: Callable[[], Any]) -> Any:
        """``HashMap.computeIfAbsent``: resize first if over threshold, insert at the bucket's head."""
        if self._table is None or self._size > self._threshold():
            self._resize()
        if key in self._values:
            return self._values[key]
        value = factory()
        table = self._buckets()
        bucket = table[self._index(key, len(table))]
        nodes_before = len(bucket)
        bucket.insert(0, key)
        self._values[key] = value
        if nodes_before >= _TREEIFY_THRESHOLD - 1:
            self._treeify_bin()
        self._size += 1
        return value

    def remove(self, key: Hashable) -> bool:
        """``HashMap.remove``: unlink the node; the table never shrinks. True if it was present."""
        if key not in self._values:
            return False
        del self._values[key]
        table = self._buckets()
        table[self._index(key, len(table))].remove(key)
        self._size -= 1
        return True

    def keys(self) -> list:
        """Keys in iteration order (a snapshot: removing the current key while walking it is safe)."""
        if self._table is None:
            return []
        return [key for bucket in self._table for key in bucket]

    def __iter__(self) -> Iterator:
        return iter(self.keys())

    def items(self) -> list[tuple]:
        return [(key, self._values[key]) for key in self.keys()]

    def values(self) -> list:
        return [self._values[key] for key in self.keys()]

    def is_empty(self) -> bool:
        return self._size == 0


class JavaHashSet(JavaHashMap):
    """``java.util.HashSet``: a :class:`JavaHashMap` whose values are unused."""

    __slots__ = ()

    def add(self, key: Hashable) -> bool:
        if key in self._values:
            return False
        self.put(key, None)
        return True

    @classmethod
    def copy_of(cls, items: Iterable[Hashable], hash_fn: Callable[[Any], int] = java_string_hash) -> JavaHashSet:
        """``new HashSet<>(collection)``: capacity from the size, then ``add`` in the collection's order."""
        items = list(items)
        result = cls(hash_fn, copy_constructor_capacity(len(items)))
        for item in items:
            result.add(item)
        return result


def copy_map(source: JavaHashMap, hash_fn: Callable[[Any], int]) -> JavaHashMap:
    """``new HashMap<>(map)``: capacity ``tableSizeFor((int)(size / 0.75f + 1))``, then ``put`` in order."""
    size = len(source)
    result = JavaHashMap(hash_fn, int(size / 0.75 + 1.0) if size else None)
    for key, value in source.items():
        result.put(key, value)
    return result


class JavaPriorityQueue:
    """``java.util.PriorityQueue`` with a comparator: the same array heap, ``siftUp`` on ``offer`` and
    ``siftDown`` of the last element on ``poll``, so ties come out in Java's order.

    ``compare(a, b)`` returns a negative, zero or positive int like ``Comparator.compare``.
    """

    __slots__ = ("_compare", "_heap")

    def __init__(self, compare: Callable[[Any, Any], int], items: Iterable[Any] = ()):
        self._compare = compare
        self._heap: list = []
        for item in items:
            self.offer(item)

    def __len__(self) -> int:
        return len(self._heap)

    def is_empty(self) -> bool:
        return not self._heap

    def offer(self, item: Any) -> None:
        heap = self._heap
        heap.append(item)
        k = len(heap) - 1
        compare = self._compare
        while k > 0:
            parent = (k - 1) >> 1
            above = heap[parent]
            if compare(item, above) >= 0:
                break
            heap[k] = above
            k = parent
        heap[k] = item

    add = offer

    def poll(self) -> Any:
        """Remove and return the head, or ``None`` when empty (as Java does)."""
        heap = self._heap
        if not heap:
            return None
        result = heap[0]
        last = heap.pop()
        n = len(heap)
        if n:
            compare = self._compare
            k = 0
            half = n >> 1
            while k < half:
                child = 2 * k + 1
                smallest = heap[child]
                right = child + 1
                if right < n and compare(smallest, heap[right]) > 0:
                    child = right
                    smallest = heap[child]
                if compare(last, smallest) <= 0:
                    break
                heap[k] = smallest
                k = child
            heap[k] = last
        return result
