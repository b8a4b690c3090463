/*
 * Compiled kernel of the share-group SimpleAssignor (offsets_audit.assignors.simple).
 *
 * Mirrors Kafka's SimpleHomogeneousAssignmentBuilder and SimpleHeterogeneousAssignmentBuilder step for step,
 * over a model of java.util.HashMap/HashSet that keeps Java's table layout (the same model as
 * java_hashmap.JavaHashMap): put/add append at the bucket's tail and resize after inserting past
 * 0.75 * capacity; computeIfAbsent resizes first and inserts at the bucket's head; a bucket growing past 8 nodes
 * in a table under 64 resizes (treeifyBin); a resize splits buckets keeping order; iteration walks buckets.
 * Tie-breaks in the assignor follow that iteration order, so the model is what makes the result exact.
 *
 * The pure-Python builders in simple.py are the reference; tests run both on every golden case and on
 * randomised groups. Parsing the golden-layout input and building the output dicts happen here too, because
 * they are a large part of a re-run's time at 1,000 members.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------------------------ */
/* java.util.HashMap model: keys are int64 (an Integer, a topic index, or topic << 32 | partition), values int64 */
/* (an int or a pointer to another map). `hash` holds the spread hash h ^ (h >>> 16).                           */

typedef struct {
    int64_t key;
    int64_t val;
    uint32_t hash;
    int32_t next;
} Node;

typedef struct JMap {
    int32_t *tab;   /* heads, -1 = empty; NULL until the first insertion */
    int32_t cap;
    int32_t thr;    /* Java's `threshold`: the initial capacity before allocation, then (int) (cap * 0.75) */
    int32_t size;
    Node *nodes;
    int32_t nn, na, freel;
} JMap;

/* Every map of one run lives in a bump arena, freed at once at the end: a 1,000-member group makes a million
 * small sets, and malloc/free per set was a third of the run. */
typedef struct Chunk {
    struct Chunk *prev;
    size_t used, cap;
    int64_t data[];
} Chunk;

typedef struct {
    Chunk *chunk;
    Chunk *spare;   /* chunks kept from earlier runs (fresh pages cost a page fault each) */
    int oom;
} Arena;

#define CHUNK_BYTES ((size_t) 1 << 22)
#define KEPT_CHUNKS 32   /* at most 128 MiB kept between runs */

static void *arena_alloc(Arena *a, size_t bytes) {
    bytes = (bytes + 7) & ~(size_t) 7;
    if (!a->chunk || a->chunk->used + bytes > a->chunk->cap) {
        Chunk *c;
        if (a->spare && a->spare->cap >= bytes) {
            c = a->spare;
            a->spare = c->prev;
        } else {
            size_t cap = bytes > CHUNK_BYTES ? bytes : CHUNK_BYTES;
            c = (Chunk *) malloc(sizeof(Chunk) + cap);
            if (!c) { a->oom = 1; return NULL; }
            c->cap = cap;
        }
        c->prev = a->chunk;
        c->used = 0;
        a->chunk = c;
    }
    void *p = (char *) a->chunk->data + a->chunk->used;
    a->chunk->used += bytes;
    return p;
}

static uint32_t spread(int32_t h) {
    uint32_t u = (uint32_t) h;
    return u ^ (u >> 16);
}

static int32_t table_size_for(int64_t c) {
    int32_t n = 1;
    while (n < c) n <<= 1;
    return n;
}

/* initial < 0: `new HashMap<>()`; otherwise `new HashMap<>(initial)`. */
static JMap *jm_new(Arena *a, int64_t initial) {
    JMap *m = (JMap *) arena_alloc(a, sizeof(JMap));
    if (!m) return NULL;
    memset(m, 0, sizeof(JMap));
    m->thr = initial < 0 ? 0 : table_size_for(initial);
    m->freel = -1;
    return m;
}

/* AssignorHelpers.newHashMap / newHashSet(n): (int) (((n + 1) / 0.75f) + 1) */
static int64_t helper_capacity(int64_t n) {
    return (int64_t) ((((float) (n + 1)) / 0.75f) + 1.0f);
}

/* new HashSet<>(collection): max((int) (size / .75f) + 1, 16) */
static int64_t copy_capacity(int64_t size) {
    int64_t c = (int64_t) (((float) size) / 0.75f) + 1;
    return c > 16 ? c : 16;
}

static int jm_resize(Arena *a, JMap *m) {
    int32_t old_cap = m->cap, old_thr = m->thr, new_cap, new_thr = 0;
    if (old_cap > 0) {
        new_cap = old_cap << 1;
        if (old_cap >= 16) new_thr = old_thr << 1;
    } else if (old_thr > 0) {
        new_cap = old_thr;
    } else {
        new_cap = 16;
        new_thr = 12;
    }
    if (new_thr == 0) new_thr = (int32_t) ((float) new_cap * 0.75f);
    int32_t *tab = (int32_t *) arena_alloc(a, sizeof(int32_t) * (size_t) new_cap);
    if (!tab) return -1;
    for (int32_t i = 0; i < new_cap; i++) tab[i] = -1;
    if (m->tab) {
        for (int32_t j = 0; j < old_cap; j++) {
            int32_t lo_head = -1, lo_tail = -1, hi_head = -1, hi_tail = -1;
            for (int32_t e = m->tab[j]; e >= 0;) {
                int32_t nx = m->nodes[e].next;
                if ((m->nodes[e].hash & (uint32_t) old_cap) == 0) {
                    if (lo_tail < 0) lo_head = e; else m->nodes[lo_tail].next = e;
                    lo_tail = e;
                } else {
                    if (hi_tail < 0) hi_head = e; else m->nodes[hi_tail].next = e;
                    hi_tail = e;
                }
                e = nx;
            }
            if (lo_tail >= 0) { m->nodes[lo_tail].next = -1; tab[j] = lo_head; }
            if (hi_tail >= 0) { m->nodes[hi_tail].next = -1; tab[j + old_cap] = hi_head; }
        }
    }
    m->tab = tab;
    m->cap = new_cap;
    m->thr = new_thr;
    return 0;
}

static int32_t jm_alloc_node(Arena *a, JMap *m) {
    if (m->freel >= 0) {
        int32_t e = m->freel;
        m->freel = m->nodes[e].next;
        return e;
    }
    if (m->nn == m->na) {
        int32_t na = m->na ? m->na * 2 : 1;
        Node *nodes = (Node *) arena_alloc(a, sizeof(Node) * (size_t) na);
        if (!nodes) return -1;
        if (m->nn) memcpy(nodes, m->nodes, sizeof(Node) * (size_t) m->nn);
        m->nodes = nodes;
        m->na = na;
    }
    return m->nn++;
}

static int32_t jm_find(const JMap *m, int64_t key, uint32_t h) {
    if (!m->tab) return -1;
    for (int32_t e = m->tab[h & (uint32_t) (m->cap - 1)]; e >= 0; e = m->nodes[e].next)
        if (m->nodes[e].key == key) return e;
    return -1;
}

/* treeifyBin: a table under 64 buckets resizes; real tree bins are not modelled (as in java_hashmap). */
static int jm_treeify_bin(Arena *a, JMap *m) {
    if (m->cap < 64) return jm_resize(a, m);
    return 0;
}

/* HashMap.put of a new key (the caller has checked it is absent): tail of its bucket, resize after. */
static int jm_put_new(Arena *a, JMap *m, int64_t key, uint32_t h, int64_t val) {
    if (!m->tab && jm_resize(a, m) < 0) return -1;
    int32_t e = jm_alloc_node(a, m);
    if (e < 0) return -1;
    m->nodes[e].key = key; m->nodes[e].val = val; m->nodes[e].hash = h; m->nodes[e].next = -1;
    int32_t idx = (int32_t) (h & (uint32_t) (m->cap - 1));
    int32_t before = 0;
    if (m->tab[idx] < 0) {
        m->tab[idx] = e;
    } else {
        int32_t p = m->tab[idx];
        before = 1;
        while (m->nodes[p].next >= 0) { p = m->nodes[p].next; before++; }
        m->nodes[p].next = e;
        if (before >= 8 && jm_treeify_bin(a, m) < 0) return -1;
    }
    if (++m->size > m->thr && jm_resize(a, m) < 0) return -1;
    return 0;
}

/* HashSet.add: true if it was absent. */
static int jm_add(Arena *a, JMap *m, int64_t key, int32_t hash_code) {
    uint32_t h = spread(hash_code);
    if (jm_find(m, key, h) >= 0) return 0;
    return jm_put_new(a, m, key, h, 0) < 0 ? -1 : 1;
}

static int64_t jm_get(const JMap *m, int64_t key, int32_t hash_code, int64_t missing) {
    int32_t e = jm_find(m, key, spread(hash_code));
    return e < 0 ? missing : m->nodes[e].val;
}

/* First half of HashMap.computeIfAbsent: the resize it does before looking. Returns the node or -1. */
static int32_t jm_cia_lookup(Arena *a, JMap *m, int64_t key, int32_t hash_code) {
    if ((m->size > m->thr || !m->tab) && jm_resize(a, m) < 0) return -2;
    return jm_find(m, key, spread(hash_code));
}

/* Second half: insert the new value at the head of the bucket. */
static int jm_cia_insert(Arena *a, JMap *m, int64_t key, int32_t hash_code, int64_t val) {
    uint32_t h = spread(hash_code);
    int32_t e = jm_alloc_node(a, m);
    if (e < 0) return -1;
    int32_t idx = (int32_t) (h & (uint32_t) (m->cap - 1));
    int32_t bin_count = 0;
    for (int32_t p = m->tab[idx]; p >= 0; p = m->nodes[p].next) bin_count++;
    m->nodes[e].key = key; m->nodes[e].val = val; m->nodes[e].hash = h; m->nodes[e].next = m->tab[idx];
    m->tab[idx] = e;
    if (bin_count >= 7 && jm_treeify_bin(a, m) < 0) return -1;
    m->size++;
    return 0;
}

/* map.computeIfAbsent(key, k -> new HashSet<>(initial)) returning the set. */
static JMap *jm_cia_set(Arena *a, JMap *m, int64_t key, int32_t hash_code, int64_t initial) {
    int32_t e = jm_cia_lookup(a, m, key, hash_code);
    if (e == -2) return NULL;
    if (e >= 0) return (JMap *) (intptr_t) m->nodes[e].val;
    JMap *s = jm_new(a, initial);
    if (!s || jm_cia_insert(a, m, key, hash_code, (int64_t) (intptr_t) s) < 0) return NULL;
    return s;
}

static int jm_remove(JMap *m, int64_t key, int32_t hash_code) {
    if (!m || !m->tab) return 0;
    uint32_t h = spread(hash_code);
    int32_t idx = (int32_t) (h & (uint32_t) (m->cap - 1));
    int32_t prev = -1;
    for (int32_t e = m->tab[idx]; e >= 0; prev = e, e = m->nodes[e].next) {
        if (m->nodes[e].key == key) {
            if (prev < 0) m->tab[idx] = m->nodes[e].next; else m->nodes[prev].next = m->nodes[e].next;
            m->nodes[e].next = m->freel;
            m->freel = e;
            m->size--;
            return 1;
        }
    }
    return 0;
}

/* Keys in iteration order (a snapshot; removing the current key while walking it is what Java's iterator allows). */
typedef struct {
    int64_t *keys;
    int64_t *vals;
    int32_t len, alloc;
} Snap;

static int snap_take(Arena *a, Snap *s, const JMap *m) {
    if (s->alloc < m->size) {
        int32_t na = m->size * 2;
        int64_t *k = (int64_t *) realloc(s->keys, sizeof(int64_t) * (size_t) na);
        if (!k) { a->oom = 1; return -1; }
        s->keys = k;
        int64_t *v = (int64_t *) realloc(s->vals, sizeof(int64_t) * (size_t) na);
        if (!v) { a->oom = 1; return -1; }
        s->vals = v;
        s->alloc = na;
    }
    s->len = 0;
    if (m->size == 1 && m->nn == 1) {
        /* One entry, and no other node ever made: it is node 0 (most sets of a large share group hold one
         * partition; walking their whole table was a tenth of a run). */
        s->keys[0] = m->nodes[0].key;
        s->vals[0] = m->nodes[0].val;
        s->len = 1;
        return 0;
    }
    if (m->tab)
        for (int32_t j = 0; j < m->cap; j++)
            for (int32_t e = m->tab[j]; e >= 0; e = m->nodes[e].next) {
                s->keys[s->len] = m->nodes[e].key;
                s->vals[s->len++] = m->nodes[e].val;
            }
    return 0;
}

static void snap_free(Snap *s) {
    free(s->keys);
    free(s->vals);
    s->keys = s->vals = NULL;
    s->len = s->alloc = 0;
}

static Chunk *kept_chunks;   /* touched only with the GIL held */

static void arena_start(Arena *a) {
    a->spare = kept_chunks;
    kept_chunks = NULL;
}

/* Keeps up to KEPT_CHUNKS standard chunks for the next run, frees the rest. */
static void arena_free(Arena *a) {
    int kept = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (Chunk *c = pass ? a->spare : a->chunk; c;) {
            Chunk *prev = c->prev;
            if (kept < KEPT_CHUNKS && c->cap == CHUNK_BYTES) {
                c->prev = kept_chunks;
                kept_chunks = c;
                kept++;
            } else {
                free(c);
            }
            c = prev;
        }
    }
    a->chunk = a->spare = NULL;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* The group: members 0..n-1 in GroupSpec.memberIds() order, topics by index with Uuid.hashCode().            */

enum { OK = 0, ERR_PYTHON = 1, ERR_NO_SUCH_ELEMENT = 2, ERR_UNKNOWN_TOPIC = 3, NOTHING_SUBSCRIBED = 4 };

typedef struct {
    Arena arena;
    int32_t n;
    int32_t num_topics;
    int32_t *topic_hash;       /* Uuid.hashCode() */
    int32_t *topic_parts;      /* numPartitions, -1 when missing from the metadata */
    uint8_t **assignable;      /* per topic bitmap of assignable partitions; NULL entry = none; all NULL = all */
    int all_assignable;
    int32_t **subs;            /* per member: subscribed topic indices in HashSet<Uuid> iteration order */
    int32_t *num_subs;
    JMap **old_assignment;     /* per member: HashMap<Uuid, HashSet<Integer>> */
    JMap **new_assignment;     /* per member: NULL until written */
    int32_t missing_topic;     /* topic of a PartitionAssignorException */
    /* The builders' unfilled/overfilled member sets (AssignorHelpers.newHashSet(numGroupMembers)) as flags: such a
     * table has more buckets than the group has members, so each member index sits alone in bucket `index` and the
     * sets iterate in ascending index order; `order` is an iterator's snapshot of one. */
    uint8_t *unfilled, *overfilled;
    int32_t *order;
    int32_t *held_count;       /* step 4: finalAssignmentByMember.get(m).size(), the only thing step 4 reads of it */
    Snap s1, s2, s3;
} Group;

static int32_t tp_hash(const Group *g, int32_t topic, int32_t partition) {
    /* TopicIdPartition is a record: 31 * topicId.hashCode() + partitionId (int arithmetic). */
    return (int32_t) ((uint32_t) g->topic_hash[topic] * 31u + (uint32_t) partition);
}

static int64_t tp_key(int32_t topic, int32_t partition) {
    return ((int64_t) topic << 32) | (uint32_t) partition;
}

static int is_assignable(const Group *g, int32_t topic, int32_t partition) {
    if (g->all_assignable) return 1;
    const uint8_t *bits = g->assignable[topic];
    return bits != NULL && bits[partition];
}

/* AssignorHelpers.deepCopyAssignment */
static JMap *deep_copy(Group *g, const JMap *src) {
    Arena *a = &g->arena;
    JMap *copy = jm_new(a, src->size);
    if (!copy || !src->tab) return copy;
    for (int32_t j = 0; j < src->cap; j++)
        for (int32_t e = src->tab[j]; e >= 0; e = src->nodes[e].next) {
            const JMap *set = (const JMap *) (intptr_t) src->nodes[e].val;
            JMap *set_copy = jm_new(a, copy_capacity(set->size));
            if (!set_copy) return NULL;
            if (set->tab)
                for (int32_t i = 0; i < set->cap; i++)
                    for (int32_t f = set->tab[i]; f >= 0; f = set->nodes[f].next)
                        if (jm_add(a, set_copy, set->nodes[f].key, (int32_t) set->nodes[f].key) < 0) return NULL;
            if (jm_put_new(a, copy, src->nodes[e].key, src->nodes[e].hash, (int64_t) (intptr_t) set_copy) < 0)
                return NULL;
        }
    return copy;
}

static JMap *writable(Group *g, int32_t member) {
    if (!g->new_assignment[member]) g->new_assignment[member] = deep_copy(g, g->old_assignment[member]);
    return g->new_assignment[member];
}

static void desired_counts(int32_t *out, const int32_t *members, int32_t num_members, int32_t desired_sharing,
                           int32_t num_targets) {
    double precise = (double) (desired_sharing * num_targets) / (double) num_members;
    for (int32_t i = 0; i < num_members; i++) {
        int32_t index = members ? members[i] : i;
        out[index] = (int32_t) ceil(precise * (double) (i + 1)) - (int32_t) ceil(precise * (double) i);
    }
}

/* SimpleHeterogeneousAssignmentBuilder.TopicAssignmentPartialBuilder.build */
static int build_topic(Group *g, int32_t topic, const int32_t *subscribed, int32_t num_subscribed, int32_t *desired,
                       const int32_t *holder_members, JMap *const *holder_sets, int32_t num_holders) {
    Arena *a = &g->arena;
    const int32_t n = g->n;
    const int32_t th = g->topic_hash[topic];
    int32_t num_targets = 0;
    for (int32_t p = 0; p < g->topic_parts[topic]; p++) num_targets += is_assignable(g, topic, p);
    JMap *by_partition = jm_new(a, helper_capacity(num_targets));
    if (!by_partition) return ERR_PYTHON;
    int32_t desired_sharing = num_targets == 0 ? 0 : (num_subscribed + num_targets - 1) / num_targets;
    memset(desired, 0, sizeof(int32_t) * (size_t) n);
    desired_counts(desired, subscribed, num_subscribed, desired_sharing, num_targets);
    /* finalAssignmentByMember is iterated only by step 2, and only when some member holds more than it should;
     * otherwise its sets are only ever sized, so they are counted (held_count) and made only for that step. */
    int32_t *held_count = g->held_count;
    for (int32_t i = 0; i < num_subscribed; i++) held_count[subscribed[i]] = 0;
    int overfilled = 0;

    /* 1. revokeUnassignablePartitions: collect the current holders (the topic is subscribed by construction),
     * walking the members that hold this topic in member order (see build_heterogeneous). */
    for (int32_t h = 0; h < num_holders; h++) {
        /* The holders' sets lie one per member far apart: fetch them ahead, as build_output does. */
        if (h + 16 < num_holders) __builtin_prefetch(holder_sets[h + 16]);
        if (h + 8 < num_holders) {
            __builtin_prefetch(holder_sets[h + 8]->tab);
            __builtin_prefetch(holder_sets[h + 8]->nodes);
        }
        int32_t m = holder_members[h];
        const JMap *partitions = holder_sets[h];
        held_count[m] = partitions->size;
        if (!partitions->tab) continue;
        overfilled |= partitions->size > desired[m];
        for (int32_t j = 0; j < partitions->cap; j++)
            for (int32_t e = partitions->tab[j]; e >= 0; e = partitions->nodes[e].next) {
                int32_t p = (int32_t) partitions->nodes[e].key;
                JMap *holders = jm_cia_set(a, by_partition, p, p, -1);
                if (!holders || jm_add(a, holders, m, m) < 0) return ERR_PYTHON;
            }
    }

    /* 2. revokeOverfilledMembers, over finalAssignmentByMember filled as step 1 fills it. */
    if (overfilled) {
        JMap *by_member = jm_new(a, helper_capacity(num_subscribed));
        if (!by_member) return ERR_PYTHON;
        for (int32_t h = 0; h < num_holders; h++) {
            int32_t m = holder_members[h];
            const JMap *partitions = holder_sets[h];
            if (!partitions->tab) continue;
            for (int32_t j = 0; j < partitions->cap; j++)
                for (int32_t e = partitions->tab[j]; e >= 0; e = partitions->nodes[e].next) {
                    int32_t p = (int32_t) partitions->nodes[e].key;
                    JMap *held = jm_cia_set(a, by_member, m, m, -1);
                    if (!held || jm_add(a, held, p, p) < 0) return ERR_PYTHON;
                }
        }
        if (snap_take(a, &g->s1, by_member) < 0) return ERR_PYTHON;
        for (int32_t i = 0; i < g->s1.len; i++) {
            int32_t m = (int32_t) g->s1.keys[i];
            JMap *held = (JMap *) (intptr_t) g->s1.vals[i];
            if (held->size <= desired[m]) continue;
            if (snap_take(a, &g->s2, held) < 0) return ERR_PYTHON;
            for (int32_t k = 0; k < g->s2.len && held->size > desired[m]; k++) {
                int32_t p = (int32_t) g->s2.keys[k];
                jm_remove((JMap *) (intptr_t) jm_get(by_partition, p, p, 0), m, m);
                jm_remove(held, p, p);
                JMap *assignment = writable(g, m);
                if (!assignment) return ERR_PYTHON;
                jm_remove((JMap *) (intptr_t) jm_get(assignment, topic, th, 0), p, p);
            }
            held_count[m] = held->size;
        }
    }

    /* 3. revokeOversharedPartitions */
    if (snap_take(a, &g->s1, by_partition) < 0) return ERR_PYTHON;
    for (int32_t i = 0; i < g->s1.len; i++) {
        int32_t p = (int32_t) g->s1.keys[i];
        JMap *holders = (JMap *) (intptr_t) g->s1.vals[i];
        int32_t count = holders->size;
        if (count <= desired_sharing) continue;
        if (snap_take(a, &g->s2, holders) < 0) return ERR_PYTHON;
        for (int32_t k = 0; k < g->s2.len; k++) {
            int32_t m = (int32_t) g->s2.keys[k];
            JMap *assignment = writable(g, m);
            if (!assignment) return ERR_PYTHON;
            JMap *partitions = (JMap *) (intptr_t) jm_get(assignment, topic, th, 0);
            if (partitions && jm_remove(partitions, p, p)) {
                count--;
                jm_remove(holders, m, m);
                held_count[m]--;   /* finalAssignmentByMember.get(m).remove(p): m held p, as holders said */
            }
            if (count <= desired_sharing) break;
        }
    }

    int64_t new_set_capacity = helper_capacity(num_subscribed);
    for (int32_t p = 0; p < g->topic_parts[topic]; p++)
        if (is_assignable(g, topic, p) && !jm_cia_set(a, by_partition, p, p, new_set_capacity)) return ERR_PYTHON;

    /* 4. assignRemainingPartitions, one topic: keys are bare partitions here, (topic, partition) pairs with their
     * own hash in the multi-topic form below.
     * From here on finalAssignmentByMember is only counted (the partial builder ends with this step). */
    uint8_t *unfilled = g->unfilled;
    int32_t *order = g->order;
    int32_t len = 0, num_unfilled;
    for (int32_t i = 0; i < num_subscribed; i++) {   /* subscribed is in ascending member order */
        int32_t m = subscribed[i];
        if (held_count[m] < desired[m]) {
            unfilled[m] = 1;
            order[len++] = m;
        }
    }
    num_unfilled = len;
    if (snap_take(a, &g->s1, by_partition) < 0) return ERR_PYTHON;
    int32_t pos = 0;
    int assigned_this_round = 0, rc = OK;
    for (int32_t i = 0; i < g->s1.len && num_unfilled > 0; i++) {
        int32_t p = (int32_t) g->s1.keys[i];
        JMap *holders = (JMap *) (intptr_t) g->s1.vals[i];
        if (i + 16 < g->s1.len) __builtin_prefetch((const void *) (intptr_t) g->s1.vals[i + 16]);   /* scattered sets */
        if (holders->size < desired_sharing) {
            int32_t to_make = desired_sharing - holders->size;
            while (to_make > 0) {
                if (pos >= len) {
                    if (!assigned_this_round) break;
                    int32_t kept = 0;   /* a new iterator: the members still unfilled, in the same order */
                    for (int32_t k = 0; k < len; k++) if (unfilled[order[k]]) order[kept++] = order[k];
                    len = kept;
                    pos = 0;
                    assigned_this_round = 0;
                    if (len == 0) { rc = ERR_NO_SUCH_ELEMENT; goto clear; }
                }
                int32_t m = order[pos++];
                if (jm_find(holders, m, spread(m)) >= 0) continue;
                JMap *assignment = writable(g, m);
                JMap *partitions = assignment ? jm_cia_set(a, assignment, topic, th, -1) : NULL;
                if (!partitions || jm_add(a, partitions, p, p) < 0) { rc = ERR_PYTHON; goto clear; }
                to_make--;
                assigned_this_round = 1;
                if (++held_count[m] >= desired[m]) {
                    unfilled[m] = 0;
                    num_unfilled--;
                }
            }
        }
    }
clear:
    for (int32_t k = 0; k < len; k++) unfilled[order[k]] = 0;
    return rc;
}

/* SimpleHeterogeneousAssignmentBuilder.build */
static int build_heterogeneous(Group *g) {
    Arena *a = &g->arena;
    const int32_t n = g->n;
    JMap *subscribed = jm_new(a, -1);
    if (!subscribed) return ERR_PYTHON;
    for (int32_t m = 0; m < n; m++)
        for (int32_t i = 0; i < g->num_subs[m]; i++)
            if (jm_add(a, subscribed, g->subs[m][i], g->topic_hash[g->subs[m][i]]) < 0) return ERR_PYTHON;
    Snap topics = {0};
    if (snap_take(a, &topics, subscribed) < 0) return ERR_PYTHON;
    int rc = OK;
    for (int32_t i = 0; i < topics.len; i++) {
        int32_t t = (int32_t) topics.keys[i];
        if (g->topic_parts[t] == -1) { g->missing_topic = t; rc = ERR_UNKNOWN_TOPIC; break; }
    }
    int32_t *counts = NULL, *offsets = NULL, *members = NULL, *desired = NULL;
    int32_t *held_offsets = NULL, *held_fill = NULL, *holders = NULL;
    JMap **held_sets = NULL;
    if (rc == OK && topics.len == 0) rc = NOTHING_SUBSCRIBED;   /* GroupAssignment(Map.of()) */
    if (rc == OK) {
        /* subscribedMembersByTopic: members in memberIds order per topic. */
        counts = (int32_t *) calloc((size_t) g->num_topics + 1, sizeof(int32_t));
        offsets = (int32_t *) calloc((size_t) g->num_topics + 1, sizeof(int32_t));
        int64_t total = 0;
        for (int32_t m = 0; m < n; m++) total += g->num_subs[m];
        members = (int32_t *) malloc(sizeof(int32_t) * (size_t) (total + 1));
        desired = (int32_t *) malloc(sizeof(int32_t) * (size_t) (n + 1));
        if (!counts || !offsets || !members || !desired) { a->oom = 1; rc = ERR_PYTHON; }
        if (rc == OK) {
            for (int32_t m = 0; m < n; m++)
                for (int32_t i = 0; i < g->num_subs[m]; i++) counts[g->subs[m][i]]++;
            int32_t run = 0;
            for (int32_t t = 0; t < g->num_topics; t++) { offsets[t] = run; run += counts[t]; counts[t] = 0; }
            for (int32_t m = 0; m < n; m++)
                for (int32_t i = 0; i < g->num_subs[m]; i++) {
                    int32_t t = g->subs[m][i];
                    members[offsets[t] + counts[t]++] = m;
                }
            /* The current holders of each topic in member order: the old assignments are never written (changes go
             * to copies), so one pass over them replaces a lookup of every topic in every member's map. */
            int64_t held_total = 0;
            for (int32_t m = 0; m < n; m++) held_total += g->old_assignment[m]->size;
            held_offsets = (int32_t *) calloc((size_t) g->num_topics + 1, sizeof(int32_t));
            held_fill = (int32_t *) malloc(sizeof(int32_t) * ((size_t) g->num_topics + 1));
            holders = (int32_t *) malloc(sizeof(int32_t) * (size_t) (held_total + 1));
            held_sets = (JMap **) malloc(sizeof(JMap *) * (size_t) (held_total + 1));
            if (!held_offsets || !held_fill || !holders || !held_sets) { a->oom = 1; rc = ERR_PYTHON; }
            for (int32_t m = 0; m < n && rc == OK; m++) {
                const JMap *old = g->old_assignment[m];
                if (old->tab)
                    for (int32_t j = 0; j < old->cap; j++)
                        for (int32_t e = old->tab[j]; e >= 0; e = old->nodes[e].next) held_offsets[old->nodes[e].key + 1]++;
            }
            for (int32_t t = 0; t < g->num_topics && rc == OK; t++) held_offsets[t + 1] += held_offsets[t];
            for (int32_t t = 0; t < g->num_topics && rc == OK; t++) held_fill[t] = held_offsets[t];
            for (int32_t m = 0; m < n && rc == OK; m++) {
                const JMap *old = g->old_assignment[m];
                if (old->tab)
                    for (int32_t j = 0; j < old->cap; j++)
                        for (int32_t e = old->tab[j]; e >= 0; e = old->nodes[e].next) {
                            int32_t t = (int32_t) old->nodes[e].key;
                            holders[held_fill[t]] = m;
                            held_sets[held_fill[t]++] = (JMap *) (intptr_t) old->nodes[e].val;
                        }
            }
            for (int32_t i = 0; i < topics.len && rc == OK; i++) {
                int32_t t = (int32_t) topics.keys[i];
                rc = build_topic(g, t, members + offsets[t], counts[t], desired, holders + held_offsets[t],
                                 held_sets + held_offsets[t], held_offsets[t + 1] - held_offsets[t]);
            }
        }
    }
    free(counts); free(offsets); free(members); free(desired);
    free(held_offsets); free(held_fill); free(holders); free(held_sets);
    snap_free(&topics);
    return rc;
}

/* SimpleHomogeneousAssignmentBuilder */
static int build_homogeneous(Group *g) {
    Arena *a = &g->arena;
    const int32_t n = g->n;
    const int32_t *subscribed = g->subs[0];
    const int32_t num_subscribed = g->num_subs[0];
    uint8_t *is_subscribed = (uint8_t *) calloc((size_t) g->num_topics + 1, 1);
    int32_t *desired = (int32_t *) calloc((size_t) n + 1, sizeof(int32_t));
    if (!is_subscribed || !desired) { free(is_subscribed); free(desired); a->oom = 1; return ERR_PYTHON; }
    int rc = OK;
    int64_t num_targets = 0;
    for (int32_t i = 0; i < num_subscribed; i++) {
        int32_t t = subscribed[i];
        is_subscribed[t] = 1;
        if (g->topic_parts[t] == -1) { g->missing_topic = t; rc = ERR_UNKNOWN_TOPIC; goto done; }
        for (int32_t p = 0; p < g->topic_parts[t]; p++) num_targets += is_assignable(g, t, p);
    }
    if (num_subscribed == 0) { rc = NOTHING_SUBSCRIBED; goto done; }
    int32_t desired_sharing = num_targets == 0 ? 0 : (int32_t) ((n + num_targets - 1) / num_targets);
    desired_counts(desired, NULL, n, desired_sharing, (int32_t) num_targets);
    JMap *by_partition = jm_new(a, helper_capacity(num_targets));
    JMap *by_member = jm_new(a, helper_capacity(n));
    if (!by_partition || !by_member) { rc = ERR_PYTHON; goto done; }
    uint8_t *unfilled = g->unfilled, *overfilled = g->overfilled;   /* ascending member order (see Group) */
    int32_t num_unfilled = 0;

    /* 1. revokeUnassignablePartitions */
    for (int32_t m = 0; m < n; m++) {
        JMap *old = g->old_assignment[m];
        JMap *copy = NULL;
        int32_t assigned = 0;
        if (snap_take(a, &g->s1, old) < 0) { rc = ERR_PYTHON; goto done; }
        for (int32_t i = 0; i < g->s1.len; i++) {
            int32_t t = (int32_t) g->s1.keys[i];
            JMap *partitions = (JMap *) (intptr_t) g->s1.vals[i];
            if (is_subscribed[t]) {
                if (snap_take(a, &g->s2, partitions) < 0) { rc = ERR_PYTHON; goto done; }
                for (int32_t k = 0; k < g->s2.len; k++) {
                    int32_t p = (int32_t) g->s2.keys[k];
                    assigned++;
                    JMap *holders = jm_cia_set(a, by_partition, tp_key(t, p), tp_hash(g, t, p), -1);
                    if (!holders || jm_add(a, holders, m, m) < 0) { rc = ERR_PYTHON; goto done; }
                    JMap *held = jm_cia_set(a, by_member, m, m, -1);
                    if (!held || jm_add(a, held, tp_key(t, p), tp_hash(g, t, p)) < 0) { rc = ERR_PYTHON; goto done; }
                    if (assigned >= desired[m] && !copy) {
                        copy = deep_copy(g, old);
                        if (!copy) { rc = ERR_PYTHON; goto done; }
                    }
                }
            } else {
                if (!copy) {
                    copy = deep_copy(g, old);
                    if (!copy) { rc = ERR_PYTHON; goto done; }
                }
                jm_remove(copy, t, g->topic_hash[t]);
            }
        }
        if (copy) g->new_assignment[m] = copy;
        if (assigned < desired[m]) {
            unfilled[m] = 1;
            num_unfilled++;
        } else if (assigned > desired[m]) {
            overfilled[m] = 1;
        }
    }

    /* 2. revokeOverfilledMembers */
    for (int32_t m = 0; m < n; m++) {
        if (!overfilled[m]) continue;
        JMap *held = (JMap *) (intptr_t) jm_get(by_member, m, m, 0);
        if (held->size <= desired[m]) continue;
        if (snap_take(a, &g->s2, held) < 0) { rc = ERR_PYTHON; goto done; }
        for (int32_t k = 0; k < g->s2.len; k++) {
            int64_t key = g->s2.keys[k];
            int32_t t = (int32_t) (key >> 32), p = (int32_t) (uint32_t) key;
            jm_remove((JMap *) (intptr_t) jm_get(g->new_assignment[m], t, g->topic_hash[t], 0), p, p);
            jm_remove((JMap *) (intptr_t) jm_get(by_partition, key, tp_hash(g, t, p), 0), m, m);
            jm_remove(held, key, tp_hash(g, t, p));
            if (held->size == desired[m]) break;
        }
    }

    /* 3. revokeOversharedPartitions */
    if (snap_take(a, &g->s1, by_partition) < 0) { rc = ERR_PYTHON; goto done; }
    for (int32_t i = 0; i < g->s1.len; i++) {
        int64_t key = g->s1.keys[i];
        int32_t t = (int32_t) (key >> 32), p = (int32_t) (uint32_t) key;
        JMap *holders = (JMap *) (intptr_t) g->s1.vals[i];
        int32_t count = holders->size;
        if (count <= desired_sharing) continue;
        if (snap_take(a, &g->s2, holders) < 0) { rc = ERR_PYTHON; goto done; }
        for (int32_t k = 0; k < g->s2.len; k++) {
            int32_t m = (int32_t) g->s2.keys[k];
            JMap *assignment = writable(g, m);
            if (!assignment) { rc = ERR_PYTHON; goto done; }
            JMap *partitions = (JMap *) (intptr_t) jm_get(assignment, t, g->topic_hash[t], 0);
            if (partitions && jm_remove(partitions, p, p)) {
                count--;
                jm_remove(holders, m, m);
                jm_remove((JMap *) (intptr_t) jm_get(by_member, m, m, 0), key, tp_hash(g, t, p));
                num_unfilled += !unfilled[m];
                unfilled[m] = 1;
            }
            if (count <= desired_sharing) break;
        }
    }

    for (int32_t i = 0; i < num_subscribed; i++) {
        int32_t t = subscribed[i];
        for (int32_t p = 0; p < g->topic_parts[t]; p++)
            if (is_assignable(g, t, p) && !jm_cia_set(a, by_partition, tp_key(t, p), tp_hash(g, t, p), -1)) {
                rc = ERR_PYTHON;
                goto done;
            }
    }

    /* 4. assignRemainingPartitions, several topics: keys are (topic, partition) pairs with their own hash.
     * finalAssignmentByMember is only counted from here on. */
    if (num_unfilled == 0) goto done;
    int32_t *order = g->order, *held_count = g->held_count;
    int32_t len = 0;
    for (int32_t m = 0; m < n; m++) {
        if (!unfilled[m]) continue;
        JMap *held = (JMap *) (intptr_t) jm_get(by_member, m, m, 0);
        held_count[m] = held ? held->size : 0;
        order[len++] = m;
    }
    if (snap_take(a, &g->s1, by_partition) < 0) { rc = ERR_PYTHON; goto done; }
    int32_t pos = 0;
    int assigned_this_round = 0;
    for (int32_t i = 0; i < g->s1.len && num_unfilled > 0; i++) {
        int64_t key = g->s1.keys[i];
        int32_t t = (int32_t) (key >> 32), p = (int32_t) (uint32_t) key;
        JMap *holders = (JMap *) (intptr_t) g->s1.vals[i];
        if (i + 16 < g->s1.len) __builtin_prefetch((const void *) (intptr_t) g->s1.vals[i + 16]);   /* scattered sets */
        if (holders->size < desired_sharing) {
            int32_t to_make = desired_sharing - holders->size;
            while (to_make > 0) {
                if (pos >= len) {
                    if (!assigned_this_round) break;
                    int32_t kept = 0;   /* a new iterator: the members still unfilled, in the same order */
                    for (int32_t k = 0; k < len; k++) if (unfilled[order[k]]) order[kept++] = order[k];
                    len = kept;
                    pos = 0;
                    assigned_this_round = 0;
                    if (len == 0) { rc = ERR_NO_SUCH_ELEMENT; goto done; }
                }
                int32_t m = order[pos++];
                if (jm_find(holders, m, spread(m)) >= 0) continue;
                JMap *assignment = writable(g, m);
                if (!assignment) { rc = ERR_PYTHON; goto done; }
                JMap *partitions = jm_cia_set(a, assignment, t, g->topic_hash[t], -1);
                if (!partitions || jm_add(a, partitions, p, p) < 0) { rc = ERR_PYTHON; goto done; }
                to_make--;
                assigned_this_round = 1;
                if (++held_count[m] >= desired[m]) {
                    unfilled[m] = 0;
                    num_unfilled--;
                }
            }
        }
    }
done:
    free(is_subscribed);
    free(desired);
    return rc;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Python boundary                                                                                              */

static const int8_t B64URL[256] = {
    ['A'] = 1, ['B'] = 2, ['C'] = 3, ['D'] = 4, ['E'] = 5, ['F'] = 6, ['G'] = 7, ['H'] = 8, ['I'] = 9, ['J'] = 10,
    ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15, ['P'] = 16, ['Q'] = 17, ['R'] = 18, ['S'] = 19,
    ['T'] = 20, ['U'] = 21, ['V'] = 22, ['W'] = 23, ['X'] = 24, ['Y'] = 25, ['Z'] = 26,
    ['a'] = 27, ['b'] = 28, ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32, ['g'] = 33, ['h'] = 34, ['i'] = 35,
    ['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40, ['o'] = 41, ['p'] = 42, ['q'] = 43, ['r'] = 44,
    ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48, ['w'] = 49, ['x'] = 50, ['y'] = 51, ['z'] = 52,
    ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56, ['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61,
    ['9'] = 62, ['-'] = 63, ['_'] = 64,
};

/* Uuid.fromString(s).hashCode(); -1 return with *ok = 0 when s is not 22 characters of URL-safe base64. */
static int32_t uuid_hash_of(PyObject *s, int *ok) {
    Py_ssize_t len;
    const char *text = PyUnicode_Check(s) ? PyUnicode_AsUTF8AndSize(s, &len) : NULL;
    *ok = 0;
    if (!text) { PyErr_Clear(); return 0; }
    if (len != 22) return 0;
    uint8_t raw[18];
    uint32_t acc = 0;
    int bits = 0, out = 0;
    for (Py_ssize_t i = 0; i < 22; i++) {
        int8_t v = B64URL[(uint8_t) text[i]];
        if (v == 0) return 0;
        acc = (acc << 6) | (uint32_t) (v - 1);
        bits += 6;
        if (bits >= 8) { bits -= 8; raw[out++] = (uint8_t) (acc >> bits); }
    }
    if (out != 16 || (acc & ((1u << bits) - 1)) != 0) return 0;
    uint64_t msb = 0, lsb = 0;
    for (int i = 0; i < 8; i++) msb = (msb << 8) | raw[i];
    for (int i = 8; i < 16; i++) lsb = (lsb << 8) | raw[i];
    uint64_t x = msb ^ lsb;
    *ok = 1;
    return (int32_t) ((uint32_t) (x >> 32) ^ (uint32_t) x);
}

typedef struct {
    PyObject *index;      /* topic id -> int */
    PyObject *ids;        /* list of topic id str by index */
    int32_t *hash, *parts;
    int32_t len, alloc;
} Topics;

/* Whether a and b are the same str, or two str of equal text. */
static int same_text(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    if (!PyUnicode_CheckExact(a) || !PyUnicode_CheckExact(b)) return 0;
    Py_ssize_t length = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    return length == PyUnicode_GET_LENGTH(b) && kind == PyUnicode_KIND(b)
           && memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t) length * (size_t) kind) == 0;
}

/* Index of a topic id, adding it (numPartitions -1) if new. -1 with a Python error, -2 for a bad Uuid. */
static int32_t topic_index(Topics *t, PyObject *id) {
    PyObject *found = PyDict_GetItemWithError(t->index, id);
    if (found) return (int32_t) PyLong_AsLong(found);
    if (PyErr_Occurred()) return -1;
    int ok;
    int32_t h = uuid_hash_of(id, &ok);
    if (!ok) return -2;
    if (t->len == t->alloc) {
        int32_t na = t->alloc ? t->alloc * 2 : 64;
        int32_t *nh = (int32_t *) realloc(t->hash, sizeof(int32_t) * (size_t) na);
        if (!nh) { PyErr_NoMemory(); return -1; }
        t->hash = nh;
        int32_t *np = (int32_t *) realloc(t->parts, sizeof(int32_t) * (size_t) na);
        if (!np) { PyErr_NoMemory(); return -1; }
        t->parts = np;
        t->alloc = na;
    }
    PyObject *num = PyLong_FromLong(t->len);
    if (!num || PyDict_SetItem(t->index, id, num) < 0 || PyList_Append(t->ids, id) < 0) { Py_XDECREF(num); return -1; }
    Py_DECREF(num);
    t->hash[t->len] = h;
    t->parts[t->len] = -1;
    return t->len++;
}

static long as_partition(PyObject *item) {
    long p = PyLong_AsLong(item);
    if (p == -1 && PyErr_Occurred()) return -1;
    if (p < 0 || p > INT32_MAX) { PyErr_SetString(PyExc_ValueError, "partition out of range"); return -1; }
    return p;
}

/* A HashMap<Uuid, HashSet<Integer>> filled like the coordinator fills it: put(topic, new HashSet<>(list)). */
static JMap *current_assignment_map(Arena *a, Topics *topics, PyObject *assignment, int *bad) {
    JMap *map = jm_new(a, -1);
    if (!map) return NULL;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(assignment, &pos, &key, &value)) {
        int32_t t = topic_index(topics, key);
        if (t == -2) { *bad = 1; return NULL; }
        if (t < 0) return NULL;
        PyObject *seq = PySequence_Fast(value, "partitions must be a list");
        if (!seq) return NULL;
        Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
        PyObject **items = PySequence_Fast_ITEMS(seq);
        JMap *set = jm_new(a, copy_capacity(count));
        if (!set) { Py_DECREF(seq); return NULL; }
        for (Py_ssize_t i = 0; i < count; i++) {
            long p = as_partition(items[i]);
            if (p < 0 || jm_add(a, set, p, (int32_t) p) < 0) { Py_DECREF(seq); return NULL; }
        }
        Py_DECREF(seq);
        uint32_t h = spread(topics->hash[t]);
        int32_t e = jm_find(map, t, h);
        if (e >= 0) map->nodes[e].val = (int64_t) (intptr_t) set;
        else if (jm_put_new(a, map, t, h, (int64_t) (intptr_t) set) < 0) return NULL;
    }
    return map;
}

static int cmp_int64(const void *x, const void *y) {
    int64_t a = *(const int64_t *) x, b = *(const int64_t *) y;
    return (a > b) - (a < b);
}

/* A list of partitions, not tracked by the cyclic GC: it holds only ints, so it cannot be part of a cycle, and a
 * 1,000-member run makes up to 100,000 of them that every later collection would otherwise walk (as CPython itself
 * untracks tuples and dicts of atomic values). */
static PyObject *partition_list(const int64_t *keys, int32_t len) {
    PyObject *list = PyList_New(len);
    if (!list) return NULL;
    for (int32_t i = 0; i < len; i++) {
        PyObject *p = PyLong_FromLongLong(keys[i]);
        if (!p) { Py_DECREF(list); return NULL; }
        PyList_SET_ITEM(list, i, p);
    }
    PyObject_GC_UnTrack(list);
    return list;
}

/* (members, java_order): member id -> topic id -> sorted partitions, and the same in Java iteration order. */
/* A dict sized for `size` keys up front (no rehash while filling 500 topics), where CPython exports it. */
static PyObject *dict_for(Py_ssize_t size) {
#if PY_VERSION_HEX < 0x030D0000
    return _PyDict_NewPresized(size);
#else
    (void) size;
    return PyDict_New();
#endif
}

static PyObject *build_output(Group *g, Topics *topics, PyObject *member_ids, int with_order) {
    PyObject *members = dict_for(g->n), *orders = dict_for(with_order ? g->n : 0);
    int32_t *entry_topic = NULL;
    JMap **entry_set = NULL;
    if (!members || !orders) goto fail;
    /* Every member's (topic, set) pairs in iteration order, gathered first: the sets lie far apart in the arena (made
     * topic by topic) and each costs two dependent cache misses (the set, then its nodes), so the loop below fetches
     * sets 16 ahead and their nodes 8 ahead, across members. Those misses were most of the output's time. */
    int64_t total = 0;
    for (int32_t m = 0; m < g->n; m++) total += (g->new_assignment[m] ? g->new_assignment[m] : g->old_assignment[m])->size;
    entry_topic = (int32_t *) malloc(sizeof(int32_t) * (size_t) (total + 1));
    entry_set = (JMap **) malloc(sizeof(JMap *) * (size_t) (total + 1));
    if (!entry_topic || !entry_set) goto fail;
    int64_t next = 0;
    for (int32_t m = 0; m < g->n; m++) {
        if (snap_take(&g->arena, &g->s1, g->new_assignment[m] ? g->new_assignment[m] : g->old_assignment[m]) < 0) goto fail;
        for (int32_t i = 0; i < g->s1.len; i++, next++) {
            entry_topic[next] = (int32_t) g->s1.keys[i];
            entry_set[next] = (JMap *) (intptr_t) g->s1.vals[i];
        }
    }
    next = 0;
    for (int32_t m = 0; m < g->n; m++) {
        JMap *assignment = g->new_assignment[m] ? g->new_assignment[m] : g->old_assignment[m];
        PyObject *sorted_topics = dict_for(assignment->size);
        PyObject *ordered_topics = with_order ? dict_for(assignment->size) : NULL;
        if (!sorted_topics || (with_order && !ordered_topics)) { Py_XDECREF(sorted_topics); Py_XDECREF(ordered_topics); goto fail; }
        PyObject *member_id = PyList_GET_ITEM(member_ids, m);
        int rc = PyDict_SetItem(members, member_id, sorted_topics);
        Py_DECREF(sorted_topics);
        if (with_order) {
            rc |= PyDict_SetItem(orders, member_id, ordered_topics);
            Py_DECREF(ordered_topics);
        }
        if (rc < 0) goto fail;
        for (int64_t end = next + assignment->size; next < end; next++) {
            if (next + 16 < total) __builtin_prefetch(entry_set[next + 16]);
            if (next + 8 < total) __builtin_prefetch(entry_set[next + 8]->nodes);
            PyObject *topic_id = PyList_GET_ITEM(topics->ids, (Py_ssize_t) entry_topic[next]);
            if (snap_take(&g->arena, &g->s2, entry_set[next]) < 0) goto fail;
            if (with_order) {
                PyObject *ordered = partition_list(g->s2.keys, g->s2.len);
                if (!ordered || PyDict_SetItem(ordered_topics, topic_id, ordered) < 0) { Py_XDECREF(ordered); goto fail; }
                Py_DECREF(ordered);
            }
            if (g->s2.len > 1) qsort(g->s2.keys, (size_t) g->s2.len, sizeof(int64_t), cmp_int64);
            PyObject *sorted = partition_list(g->s2.keys, g->s2.len);
            if (!sorted || PyDict_SetItem(sorted_topics, topic_id, sorted) < 0) { Py_XDECREF(sorted); goto fail; }
            Py_DECREF(sorted);
        }
        /* Untracked like the lists they hold (only str keys and lists of ints: no cycle can run through them);
         * the first collection after a run otherwise walks 1,000 dicts of up to 1,000 entries each. A later
         * insertion of a container tracks such a dict again (CPython's own rule). */
        PyObject_GC_UnTrack(sorted_topics);
        if (with_order) PyObject_GC_UnTrack(ordered_topics);
    }
    free(entry_topic);
    free(entry_set);
    PyObject *result = Py_BuildValue("(OO)", members, with_order ? orders : Py_None);
    Py_DECREF(members);
    Py_DECREF(orders);
    return result;
fail:
    free(entry_topic);
    free(entry_set);
    Py_XDECREF(members);
    Py_XDECREF(orders);
    if (!PyErr_Occurred()) PyErr_NoMemory();
    return NULL;
}

static PyObject *k_id, *k_parts, *k_member, *k_subs;   /* interned dict keys of the golden layout */
static PyObject *Unsupported;   /* the input needs the reference builders (e.g. a topic id that is not a Uuid) */

/*
 * assign(members, assignments, topics, assignable, homogeneous, with_order[, as_listed])
 *   members: list of member dicts in GroupSpec.memberIds() order (golden layout);
 *   as_listed: iterate each member's subscribed topic ids as listed (an input rebuilt from the log), not as a
 *              HashSet<Uuid> filled in that order (a golden input);
 *   assignments: list, per member, of the dict topic id -> partitions to use as its current assignment, in the
 *                order its HashMap/HashSets were filled;
 *   topics: the metadata list (id, partitions); assignable: None or dict topic id -> partitions.
 * Returns ("ok", members, java_order) or ("NoSuchElementException", None, None) or
 * ("PartitionAssignorException", topic_id, None).
 */
static PyObject *py_assign(PyObject *self, PyObject *args) {
    PyObject *member_list, *assignment_list, *topic_list, *assignable;
    int homogeneous, with_order, as_listed = 0;
    if (!PyArg_ParseTuple(args, "O!O!O!Opp|p", &PyList_Type, &member_list, &PyList_Type, &assignment_list,
                          &PyList_Type, &topic_list, &assignable, &homogeneous, &with_order, &as_listed))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(member_list);
    if (PyList_GET_SIZE(assignment_list) != n) { PyErr_SetString(PyExc_ValueError, "one assignment per member"); return NULL; }
    /* Past 65,536 members HashMap.hash no longer leaves a member index in bucket `index` (see Group): the reference
     * builders take such a group. */
    if (n > 65536) { PyErr_SetString(Unsupported, "more members than the kernel's member sets model"); return NULL; }

    Topics topics = {0};
    Group g;
    memset(&g, 0, sizeof(g));
    PyObject *result = NULL, *member_ids = NULL, *first_subscription = NULL;
    int unsupported = 0;
    topics.index = PyDict_New();
    topics.ids = PyList_New(0);
    member_ids = PyList_New(n);
    if (!topics.index || !topics.ids || !member_ids) goto out;

    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(topic_list); i++) {
        PyObject *topic = PyList_GET_ITEM(topic_list, i);
        PyObject *id = PyDict_Check(topic) ? PyDict_GetItemWithError(topic, k_id) : NULL;
        PyObject *parts = id ? PyDict_GetItemWithError(topic, k_parts) : NULL;
        if (!parts) { unsupported = 1; goto out; }
        int32_t t = topic_index(&topics, id);
        if (t == -2) { unsupported = 1; goto out; }
        if (t < 0) goto out;
        long count = PyLong_AsLong(parts);
        if (count == -1 && PyErr_Occurred()) goto out;
        if (count < -1 || count > (1 << 24)) { unsupported = 1; goto out; }
        topics.parts[t] = (int32_t) count;
    }

    g.n = (int32_t) n;
    arena_start(&g.arena);
    g.subs = (int32_t **) calloc((size_t) n + 1, sizeof(int32_t *));
    g.num_subs = (int32_t *) calloc((size_t) n + 1, sizeof(int32_t));
    g.old_assignment = (JMap **) calloc((size_t) n + 1, sizeof(JMap *));
    g.new_assignment = (JMap **) calloc((size_t) n + 1, sizeof(JMap *));
    g.unfilled = (uint8_t *) calloc((size_t) n + 1, 1);
    g.overfilled = (uint8_t *) calloc((size_t) n + 1, 1);
    g.order = (int32_t *) calloc((size_t) n + 1, sizeof(int32_t));
    g.held_count = (int32_t *) calloc((size_t) n + 1, sizeof(int32_t));
    if (!g.subs || !g.num_subs || !g.old_assignment || !g.new_assignment || !g.unfilled || !g.overfilled || !g.order
        || !g.held_count) { PyErr_NoMemory(); goto out; }
    for (Py_ssize_t m = 0; m < n; m++) {
        PyObject *member = PyList_GET_ITEM(member_list, m);
        PyObject *member_id = PyDict_Check(member) ? PyDict_GetItemWithError(member, k_member) : NULL;
        PyObject *subs = member_id ? PyDict_GetItemWithError(member, k_subs) : NULL;
        if (!subs) { unsupported = 1; goto out; }
        Py_INCREF(member_id);
        PyList_SET_ITEM(member_ids, m, member_id);
        PyObject *seq = PySequence_Fast(subs, "subscribed_topic_ids must be a list");
        if (!seq) goto out;
        if (m == 0) {
            Py_INCREF(seq);
            first_subscription = seq;
        }
        Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
        PyObject **items = PySequence_Fast_ITEMS(seq);
        if (homogeneous && m > 0) {
            /* The homogeneous builder reads only the first member's subscription; the others' topic ids are still
             * checked (a non-Uuid id sends the input to the reference builders, as it did), but no HashSet is
             * modelled for them: at 1,000 members x 1,000 topics that was a third of the run. An id equal to the
             * first member's at the same position was checked with it (members of one group list their topics
             * alike), so only the others are looked up. */
            PyObject **first_items = PySequence_Fast_ITEMS(first_subscription);
            Py_ssize_t first_count = PySequence_Fast_GET_SIZE(first_subscription);
            for (Py_ssize_t i = 0; i < count; i++) {
                if (i < first_count && same_text(items[i], first_items[i])) continue;
                int32_t t = topic_index(&topics, items[i]);
                if (t == -2) { unsupported = 1; Py_DECREF(seq); goto out; }
                if (t < 0) { Py_DECREF(seq); goto out; }
            }
            Py_DECREF(seq);
            goto current_assignment;
        }
        /* MemberSubscription.subscribedTopicIds(): a HashSet<Uuid> filled in input order; or, for an input rebuilt
         * from the log (`as_listed`), the coordinator's view over the member's topic names, iterated as listed
         * (the set then only drops a repeated id). */
        JMap *set = jm_new(&g.arena, -1);
        if (!set) { Py_DECREF(seq); PyErr_NoMemory(); goto out; }
        g.subs[m] = (int32_t *) malloc(sizeof(int32_t) * ((size_t) count + 1));
        if (!g.subs[m]) { Py_DECREF(seq); PyErr_NoMemory(); goto out; }
        int32_t listed = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            int32_t t = topic_index(&topics, items[i]);
            if (t == -2) { unsupported = 1; Py_DECREF(seq); goto out; }
            int added = t < 0 ? -1 : jm_add(&g.arena, set, t, topics.hash[t]);
            if (added < 0) { Py_DECREF(seq); goto out; }
            if (added) g.subs[m][listed++] = t;
        }
        Py_DECREF(seq);
        if (as_listed) {
            g.num_subs[m] = listed;
        } else {
            if (snap_take(&g.arena, &g.s1, set) < 0) { PyErr_NoMemory(); goto out; }
            g.num_subs[m] = g.s1.len;
            for (int32_t i = 0; i < g.s1.len; i++) g.subs[m][i] = (int32_t) g.s1.keys[i];
        }

    current_assignment:;
        PyObject *assignment = PyList_GET_ITEM(assignment_list, m);
        if (!PyDict_Check(assignment)) { unsupported = 1; goto out; }
        g.old_assignment[m] = current_assignment_map(&g.arena, &topics, assignment, &unsupported);
        if (!g.old_assignment[m]) goto out;
    }

    g.num_topics = topics.len;
    g.topic_hash = topics.hash;
    g.topic_parts = topics.parts;
    g.all_assignable = assignable == Py_None;
    if (!g.all_assignable) {
        if (!PyDict_Check(assignable)) { unsupported = 1; goto out; }
        g.assignable = (uint8_t **) calloc((size_t) topics.len + 1, sizeof(uint8_t *));
        if (!g.assignable) { PyErr_NoMemory(); goto out; }
        for (int32_t t = 0; t < topics.len; t++) {
            PyObject *allowed = PyDict_GetItemWithError(assignable, PyList_GET_ITEM(topics.ids, t));
            if (!allowed) { if (PyErr_Occurred()) goto out; continue; }
            int32_t parts = topics.parts[t] > 0 ? topics.parts[t] : 0;
            g.assignable[t] = (uint8_t *) calloc((size_t) parts + 1, 1);
            if (!g.assignable[t]) { PyErr_NoMemory(); goto out; }
            PyObject *seq = PySequence_Fast(allowed, "assignable partitions must be a list");
            if (!seq) goto out;
            for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
                long p = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
                if (p == -1 && PyErr_Occurred()) { Py_DECREF(seq); goto out; }
                if (p >= 0 && p < parts) g.assignable[t][p] = 1;
            }
            Py_DECREF(seq);
        }
    }

    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = homogeneous ? build_homogeneous(&g) : build_heterogeneous(&g);
    Py_END_ALLOW_THREADS
    if (g.arena.oom) { PyErr_NoMemory(); goto out; }
    if (rc == ERR_NO_SUCH_ELEMENT) {
        result = Py_BuildValue("(sOO)", "NoSuchElementException", Py_None, Py_None);
    } else if (rc == ERR_UNKNOWN_TOPIC) {
        result = Py_BuildValue("(sOO)", "PartitionAssignorException", PyList_GET_ITEM(topics.ids, g.missing_topic), Py_None);
    } else if (rc == NOTHING_SUBSCRIBED) {
        result = Py_BuildValue("(sNN)", "ok", PyDict_New(), with_order ? PyDict_New() : Py_BuildValue(""));
    } else if (rc == OK) {
        PyObject *out = build_output(&g, &topics, member_ids, with_order);
        if (out) {
            result = Py_BuildValue("(sOO)", "ok", PyTuple_GET_ITEM(out, 0), PyTuple_GET_ITEM(out, 1));
            Py_DECREF(out);
        }
    } else if (!PyErr_Occurred()) {
        PyErr_NoMemory();
    }
out:
    if (unsupported && !PyErr_Occurred()) PyErr_SetString(Unsupported, "input needs the reference builders");
    if (unsupported && PyErr_Occurred() && !PyErr_ExceptionMatches(Unsupported)) {
        PyErr_Clear();
        PyErr_SetString(Unsupported, "input needs the reference builders");
    }
    arena_free(&g.arena);
    snap_free(&g.s1); snap_free(&g.s2); snap_free(&g.s3);
    if (g.subs) for (Py_ssize_t m = 0; m < n; m++) free(g.subs[m]);
    free(g.subs); free(g.num_subs); free(g.old_assignment); free(g.new_assignment);
    free(g.unfilled); free(g.overfilled); free(g.order); free(g.held_count);
    if (g.assignable) for (int32_t t = 0; t < topics.len; t++) free(g.assignable[t]);
    free(g.assignable);
    free(topics.hash); free(topics.parts);
    Py_XDECREF(topics.index); Py_XDECREF(topics.ids); Py_XDECREF(member_ids); Py_XDECREF(first_subscription);
    return result;
}

/*
 * string_hashmap_order(keys) -> keys in the iteration order of a HashMap<String, ...> filled with them in list order:
 * java_order.hashmap_order for distinct str keys, computed here because at 1,000 members it was a tenth of a
 * homogeneous run. String.hashCode over UTF-16 code units (a character past U+FFFF counts as its surrogate pair), a
 * default table doubled while size > 0.75 * capacity, buckets in index order, list order within one. A lone surrogate
 * (which utf-16 cannot encode) raises ValueError, as hashmap_order's encode does.
 */
static PyObject *py_string_hashmap_order(PyObject *self, PyObject *keys) {
    (void) self;
    if (!PyList_Check(keys)) { PyErr_SetString(PyExc_TypeError, "keys must be a list"); return NULL; }
    Py_ssize_t n = PyList_GET_SIZE(keys);
    int64_t capacity = 16;
    while ((double) n > (double) capacity * 0.75) capacity <<= 1;
    uint32_t *bucket = (uint32_t *) malloc(sizeof(uint32_t) * ((size_t) n + 1));
    Py_ssize_t *start = (Py_ssize_t *) calloc((size_t) capacity + 1, sizeof(Py_ssize_t));
    PyObject *ordered = NULL;
    if (!bucket || !start) { PyErr_NoMemory(); goto out; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        if (!PyUnicode_Check(key)) { PyErr_SetString(PyExc_TypeError, "keys must be str"); goto out; }
        int kind = PyUnicode_KIND(key);
        const void *data = PyUnicode_DATA(key);
        uint32_t h = 0;
        for (Py_ssize_t k = 0, len = PyUnicode_GET_LENGTH(key); k < len; k++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, k);
            if (c >= 0xD800 && c <= 0xDFFF) { PyErr_SetString(PyExc_ValueError, "lone surrogate in a key"); goto out; }
            if (c > 0xFFFF) {
                c -= 0x10000;
                h = 31u * h + (0xD800u + (c >> 10));
                h = 31u * h + (0xDC00u + (c & 0x3FFu));
            } else {
                h = 31u * h + c;
            }
        }
        bucket[i] = (h ^ (h >> 16)) & (uint32_t) (capacity - 1);
        start[bucket[i] + 1]++;
    }
    for (int64_t b = 0; b < capacity; b++) start[b + 1] += start[b];
    ordered = PyList_New(n);
    if (!ordered) goto out;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        Py_INCREF(key);
        PyList_SET_ITEM(ordered, start[bucket[i]]++, key);
    }
out:
    free(bucket);
    free(start);
    return ordered;
}

static PyMethodDef methods[] = {
    {"assign", py_assign, METH_VARARGS, "Kafka's share-group SimpleAssignor over a golden-layout group (see simple.py)."},
    {"string_hashmap_order", py_string_hashmap_order, METH_O,
     "Distinct str keys in the iteration order of a Java HashMap filled with them in list order."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_simple_kernel", NULL, -1, methods};

PyMODINIT_FUNC PyInit__simple_kernel(void) {
    PyObject *mod = PyModule_Create(&module);
    if (!mod) return NULL;
    Unsupported = PyErr_NewException("offsets_audit.assignors._simple_kernel.Unsupported", PyExc_ValueError, NULL);
    if (!Unsupported || PyModule_AddObject(mod, "Unsupported", Unsupported) < 0) { Py_XDECREF(mod); return NULL; }
    Py_INCREF(Unsupported);
    k_id = PyUnicode_InternFromString("id");
    k_parts = PyUnicode_InternFromString("partitions");
    k_member = PyUnicode_InternFromString("member_id");
    k_subs = PyUnicode_InternFromString("subscribed_topic_ids");
    if (!k_id || !k_parts || !k_member || !k_subs) { Py_DECREF(mod); return NULL; }
    return mod;
}
