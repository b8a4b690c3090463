/*
 * Compiled kernel of the server-side RangeAssignor (offsets_audit.assignors.range).
 *
 * Kafka's RangeAssignor walks the members in sorted order and hands each subscriber of a topic the next
 * contiguous range from that topic's cursor: the k-th subscriber (0-based) of a topic with n partitions and s
 * subscribers gets [k*q + min(k, r), ...) of length q + (k < r), where q, r = n / s, n % s; an empty range gives
 * no entry. range.py sorts the members and parses the case; this file does the per (member, topic) work and
 * builds the result dicts, which is where a 1,000-member, 1,000-topic re-run spends its time.
 *
 * The pure-Python paths in range.py (plain loops for small groups, numpy for large ones) are the reference;
 * tests run the golden cases and random groups through both. Anything this kernel does not model (a topic twice
 * in one subscription, a partition count outside 0..2^31-1) is declined, and range.py answers it as before.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    Py_ssize_t partitions;   /* n */
    Py_ssize_t subscribers;  /* s */
    Py_ssize_t next_rank;    /* the topic's cursor, in subscribers handed out so far */
    Py_ssize_t last_member;  /* the member that last subscribed: catches a topic twice in one subscription */
    PyObject *topic_id;      /* borrowed from the subscriptions */
} TopicSlot;

typedef struct {
    TopicSlot *slots;
    Py_ssize_t count, capacity;
    PyObject *index;         /* topic id -> slot number (a dict: str hashes are cached, lookups are cheap) */
    Py_ssize_t *pair_slot;   /* heterogeneous: the slot of every (member, topic) pair, in member order */
} Topics;

static PyObject *STATUS_OK, *STATUS_MISSING, *STATUS_DECLINE;

static void topics_free(Topics *t) {
    free(t->slots);
    free(t->pair_slot);
    Py_XDECREF(t->index);
}

/* The slot of `topic_id`, added when new; -1 with an exception set on failure, -2 for a topic id that is not a
 * str (declined: only str keys guarantee that no Python code runs, and mutates the input, during the lookups). */
static Py_ssize_t topics_slot(Topics *t, PyObject *topic_id) {
    if (!PyUnicode_CheckExact(topic_id)) return -2;
    PyObject *found = PyDict_GetItemWithError(t->index, topic_id);
    if (found) return PyLong_AsSsize_t(found);
    if (PyErr_Occurred()) return -1;
    if (t->count == t->capacity) {
        Py_ssize_t capacity = t->capacity ? t->capacity * 2 : 64;
        TopicSlot *grown = (TopicSlot *) realloc(t->slots, (size_t) capacity * sizeof(TopicSlot));
        if (!grown) { PyErr_NoMemory(); return -1; }
        t->slots = grown;
        t->capacity = capacity;
    }
    PyObject *number = PyLong_FromSsize_t(t->count);
    if (!number) return -1;
    int failed = PyDict_SetItem(t->index, topic_id, number);
    Py_DECREF(number);
    if (failed) return -1;
    TopicSlot *slot = &t->slots[t->count];
    slot->partitions = 0;
    slot->subscribers = 0;
    slot->next_rank = 0;
    slot->last_member = -1;
    slot->topic_id = topic_id;
    return t->count++;
}

/* Looks every slot's partition count up; STATUS_MISSING for a topic Kafka's describer does not know (-1 or absent,
 * "Member is subscribed to a non-existent topic"), STATUS_DECLINE for a count this kernel does not model, NULL on
 * error, else NULL with no exception. */
static PyObject *topics_resolve(Topics *t, PyObject *partitions_of) {
    for (Py_ssize_t i = 0; i < t->count; i++) {
        PyObject *value = PyDict_GetItemWithError(partitions_of, t->slots[i].topic_id);
        if (!value) {
            if (PyErr_Occurred()) return NULL;
            return STATUS_MISSING;
        }
        if (!PyLong_Check(value)) return STATUS_DECLINE;
        int overflow = 0;
        long long n = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (n == -1 && PyErr_Occurred()) return NULL;
        if (overflow || n < -1 || n > INT32_MAX) return STATUS_DECLINE;
        if (n == -1) return STATUS_MISSING;
        t->slots[i].partitions = (Py_ssize_t) n;
    }
    return NULL;
}

/* list(range(start, end)), not tracked by the cyclic GC: it holds only ints, so it cannot be part of a cycle, and a
 * 1,000-member re-run makes 50,000 of them that every later collection would otherwise walk (as CPython itself
 * untracks tuples and dicts of atomic values). */
static PyObject *partition_list(Py_ssize_t start, Py_ssize_t end) {
    PyObject *list = PyList_New(end - start);
    if (!list) return NULL;
    for (Py_ssize_t p = start; p < end; p++) {
        PyObject *number = PyLong_FromSsize_t(p);
        if (!number) { Py_DECREF(list); return NULL; }
        PyList_SET_ITEM(list, p - start, number);
    }
    PyObject_GC_UnTrack(list);
    return list;
}

/* Hands the topic's next range to `assignment` (nothing when it is empty); -1 on error. */
static int take_range(TopicSlot *slot, PyObject *assignment) {
    Py_ssize_t k = slot->next_rank++;
    Py_ssize_t n = slot->partitions, s = slot->subscribers;
    Py_ssize_t quota = n / s, extra = n % s;
    Py_ssize_t start = k * quota + (k < extra ? k : extra);
    Py_ssize_t end = start + quota + (k < extra);
    if (end > n) end = n;
    if (start >= end) return 0;
    PyObject *partitions = partition_list(start, end);
    if (!partitions) return -1;
    int failed = PyDict_SetItem(assignment, slot->topic_id, partitions);
    Py_DECREF(partitions);
    return failed;
}

static PyObject *ok(PyObject *result) {
    PyObject *answer = PyTuple_Pack(2, STATUS_OK, result);
    Py_DECREF(result);
    return answer;
}

static PyObject *status(PyObject *which) {
    return PyTuple_Pack(2, which, Py_None);
}

/* Homogeneous: every member takes the first member's topics (deduplicated, as Kafka's Set holds them). Member k
 * gets a non-empty range of a topic exactly when k < min(members, n), so members past the largest such k get {}. */
static PyObject *assign_homogeneous(PyObject *member_ids, PyObject *subscriptions, PyObject *partitions_of) {
    Py_ssize_t members = PyList_GET_SIZE(member_ids);
    Topics topics = {0};
    PyObject *result = NULL, *first = NULL, *answer = NULL;
    topics.index = PyDict_New();
    if (!topics.index) goto done;
    first = PySequence_Fast(PyList_GET_ITEM(subscriptions, 0), "a subscription must be a list of topic ids");
    if (!first) goto done;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(first); i++) {
        Py_ssize_t slot = topics_slot(&topics, PySequence_Fast_ITEMS(first)[i]);
        if (slot == -2) { answer = status(STATUS_DECLINE); goto done; }
        if (slot < 0) goto done;
    }
    PyObject *unresolved = topics_resolve(&topics, partitions_of);
    if (unresolved) { answer = status(unresolved); goto done; }
    if (PyErr_Occurred()) goto done;
    Py_ssize_t receivers = 0;
    for (Py_ssize_t i = 0; i < topics.count; i++) {
        topics.slots[i].subscribers = members;
        if (topics.slots[i].partitions > receivers) receivers = topics.slots[i].partitions;
    }
    result = PyDict_New();
    if (!result) goto done;
    for (Py_ssize_t k = 0; k < members; k++) {
        PyObject *assignment = PyDict_New();
        if (!assignment) goto done;
        if (PyDict_SetItem(result, PyList_GET_ITEM(member_ids, k), assignment)) { Py_DECREF(assignment); goto done; }
        Py_DECREF(assignment);  /* the result holds it */
        if (k >= receivers) continue;
        for (Py_ssize_t i = 0; i < topics.count; i++) {
            if (take_range(&topics.slots[i], assignment)) goto done;
        }
    }
    answer = ok(result);
    result = NULL;
done:
    Py_XDECREF(result);
    Py_XDECREF(first);
    topics_free(&topics);
    return answer;
}

/* Heterogeneous: one pass counts each topic's subscribers (and numbers the topics), a second hands out ranges. */
static PyObject *assign_heterogeneous(PyObject *member_ids, PyObject *subscriptions, PyObject *partitions_of) {
    Py_ssize_t members = PyList_GET_SIZE(member_ids);
    Topics topics = {0};
    PyObject *result = NULL, *answer = NULL;
    PyObject **lists = (PyObject **) calloc((size_t) members + 1, sizeof(PyObject *));
    if (!lists) { PyErr_NoMemory(); return NULL; }
    topics.index = PyDict_New();
    if (!topics.index) goto done;
    Py_ssize_t pairs = 0;
    for (Py_ssize_t m = 0; m < members; m++) {
        lists[m] = PySequence_Fast(PyList_GET_ITEM(subscriptions, m), "a subscription must be a list of topic ids");
        if (!lists[m]) goto done;
        pairs += PySequence_Fast_GET_SIZE(lists[m]);
    }
    topics.pair_slot = (Py_ssize_t *) malloc((size_t) (pairs + 1) * sizeof(Py_ssize_t));
    if (!topics.pair_slot) { PyErr_NoMemory(); goto done; }
    Py_ssize_t pair = 0;
    for (Py_ssize_t m = 0; m < members; m++) {
        PyObject **subscribed = PySequence_Fast_ITEMS(lists[m]);
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(lists[m]); i++) {
            Py_ssize_t slot = topics_slot(&topics, subscribed[i]);
            if (slot == -2) { answer = status(STATUS_DECLINE); goto done; }
            if (slot < 0) goto done;
            if (topics.slots[slot].last_member == m) {  /* a topic twice in one subscription (a Set in Kafka) */
                answer = status(STATUS_DECLINE);
                goto done;
            }
            topics.slots[slot].last_member = m;
            topics.slots[slot].subscribers++;
            topics.pair_slot[pair++] = slot;
        }
    }
    PyObject *unresolved = topics_resolve(&topics, partitions_of);
    if (unresolved) { answer = status(unresolved); goto done; }
    if (PyErr_Occurred()) goto done;
    result = PyDict_New();
    if (!result) goto done;
    pair = 0;
    for (Py_ssize_t m = 0; m < members; m++) {
        PyObject *assignment = PyDict_New();
        if (!assignment) goto done;
        if (PyDict_SetItem(result, PyList_GET_ITEM(member_ids, m), assignment)) { Py_DECREF(assignment); goto done; }
        Py_DECREF(assignment);
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(lists[m]); i++) {
            if (take_range(&topics.slots[topics.pair_slot[pair++]], assignment)) goto done;
        }
    }
    answer = ok(result);
    result = NULL;
done:
    Py_XDECREF(result);
    for (Py_ssize_t m = 0; m < members; m++) Py_XDECREF(lists[m]);
    free(lists);
    topics_free(&topics);
    return answer;
}

static PyObject *assign(PyObject *self, PyObject *args) {
    PyObject *member_ids, *subscriptions, *partitions_of;
    int homogeneous;
    if (!PyArg_ParseTuple(args, "O!O!O!p", &PyList_Type, &member_ids, &PyList_Type, &subscriptions,
                          &PyDict_Type, &partitions_of, &homogeneous))
        return NULL;
    if (PyList_GET_SIZE(member_ids) != PyList_GET_SIZE(subscriptions)) {
        PyErr_SetString(PyExc_ValueError, "member_ids and subscriptions differ in length");
        return NULL;
    }
    if (PyList_GET_SIZE(member_ids) == 0) return ok(PyDict_New());
    return homogeneous ? assign_homogeneous(member_ids, subscriptions, partitions_of)
                       : assign_heterogeneous(member_ids, subscriptions, partitions_of);
}

static PyMethodDef methods[] = {
    {"assign", assign, METH_VARARGS,
     "assign(member_ids, subscriptions, partitions_of, homogeneous) -> (status, result)\n\n"
     "member_ids and subscriptions in RangeAssignor's member order; status 'ok' with member id -> {topic id -> "
     "partitions}, 'missing' (a subscribed topic is not in partitions_of: Kafka's PartitionAssignorException) or "
     "'decline' (input the pure-Python path must answer)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_range_kernel", NULL, -1, methods};

PyMODINIT_FUNC PyInit__range_kernel(void) {
    STATUS_OK = PyUnicode_InternFromString("ok");
    STATUS_MISSING = PyUnicode_InternFromString("missing");
    STATUS_DECLINE = PyUnicode_InternFromString("decline");
    if (!STATUS_OK || !STATUS_MISSING || !STATUS_DECLINE) return NULL;
    return PyModule_Create(&module);
}
