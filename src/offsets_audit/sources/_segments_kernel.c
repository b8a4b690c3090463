/*
 * Compiled fast path of the segment walk (offsets_audit.sources.segments, optional like the assignor kernels).
 *
 * walk_v2 reads a run of consecutive magic-2 batches that need none of the walk's judgement: length sane and
 * whole, CRC32C right, no compression, records parsing exactly (no headers, every varint
 * at most 9 bytes, no int64 overflow), offsets inside the segment's and at or after the first offset not yet
 * accounted for. It stops before the first batch that is anything else and leaves that batch to the Python
 * walk (_walk_batches), which decodes or quarantines it as before; so a run holds exactly the batches the
 * Python walk would read whole, with the values it would give them. The tests read every golden segment and
 * damaged or fuzzed ones both ways and compare.
 *
 * Output: the run's batch and record fields as packed native-endian arrays (bytes objects), for numpy and
 * Arrow: one Python object per column instead of a few per record. A control batch's records (transaction
 * markers) also carry what segments._control_of reads from them: the type id (CONTROL_UNKNOWN where it names
 * UNKNOWN, NOT_CONTROL in other batches) and the marker's coordinator epoch (NO_EPOCH: none).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define V2_HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define MIN_LENGTH (V2_HEADER_SIZE - LOG_OVERHEAD)
#define MAX_BATCH_LENGTH (1LL << 30)
#define MAX_VARINT_BYTES 9 /* 63 bits: no overflow in uint64; longer ones go to the Python walk */
#define NOT_CONTROL (-2)
#define CONTROL_UNKNOWN (-1)
#define KNOWN_CONTROL_TYPES 7 /* ids 0-6: segments.CONTROL_TYPE_NAMES */
#define NO_EPOCH INT64_MIN

/* ---------------------------------------------------------------------------------------- CRC32C (Castagnoli) */

static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

static uint32_t crc32c(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) { /* slicing by 8, byte by byte so that alignment and endianness do not matter */
        c ^= (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
        c = crc_table[7][c & 0xFF] ^ crc_table[6][(c >> 8) & 0xFF] ^ crc_table[5][(c >> 16) & 0xFF] ^
            crc_table[4][c >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* ------------------------------------------------------------------------------------------------ big endian */

static int64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t) v;
}

static int32_t be32(const uint8_t *p) {
    return (int32_t) (((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) | ((uint32_t) p[2] << 8) | p[3]);
}

static int16_t be16(const uint8_t *p) {
    return (int16_t) (((uint16_t) p[0] << 8) | p[1]);
}

/* A zig-zag varint at *pos (before end); 0 when it is longer than MAX_VARINT_BYTES or runs past end. */
static int zigzag(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t end, int64_t *out) {
    uint64_t raw = 0;
    int shift = 0;
    for (int i = 0; i < MAX_VARINT_BYTES; i++) {
        if (*pos >= end)
            return 0;
        uint8_t byte = data[(*pos)++];
        raw |= (uint64_t) (byte & 0x7F) << shift;
        if (byte < 0x80) {
            *out = (int64_t) (raw >> 1) ^ -(int64_t) (raw & 1);
            return 1;
        }
        shift += 7;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------- growing buffers */

typedef struct {
    char *data;
    Py_ssize_t used, cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t more) {
    if (b->used + more <= b->cap)
        return 1;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->used + more)
        cap *= 2;
    char *data = realloc(b->data, (size_t) cap);
    if (!data)
        return 0;
    b->data = data;
    b->cap = cap;
    return 1;
}

static int buf_put(Buf *b, const void *p, Py_ssize_t n) {
    if (!buf_reserve(b, n))
        return 0;
    memcpy(b->data + b->used, p, (size_t) n);
    b->used += n;
    return 1;
}

enum { B_POSITION, B_BASE, B_LAST, B_PRODUCER, B_EPOCH, B_ATTRIBUTES, B_COUNT, R_OFFSET, R_TIMESTAMP, R_KEY_LEN,
       R_VALUE_LEN, R_CONTROL, R_COORDINATOR_EPOCH, KEY_DATA, VALUE_DATA, N_BUFS };

/* segments._control_of: the control type of a control record's key and, for COMMIT/ABORT, the coordinator
 * epoch of its value. */
static void control_of(const uint8_t *key, int32_t klen, const uint8_t *value, int32_t vlen, int16_t *type,
                       int64_t *epoch) {
    *type = CONTROL_UNKNOWN;
    *epoch = NO_EPOCH;
    if (klen < 4 || be16(key) < 0)
        return;
    int16_t id = be16(key + 2);
    if (id >= 0 && id < KNOWN_CONTROL_TYPES)
        *type = id;
    if ((id == 0 || id == 1) && vlen >= 6)
        *epoch = be32(value + 2);
}

/* A record's key or value: its zig-zag length (negative: null) and where its bytes start; 0 when it runs past
 * the record's end. */
static int nullable_bytes(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t record_end, int64_t *len,
                          const uint8_t **bytes) {
    if (!zigzag(data, pos, record_end, len))
        return 0;
    *bytes = data + *pos;
    if (*len >= 0) {
        if (*len > record_end - *pos)
            return 0;
        *pos += (Py_ssize_t) *len;
    }
    return 1;
}

/* The records of the batch at data[0:size] appended to bufs; 0 (nothing appended) when the Python walk must
 * judge the batch. */
static int read_records(const uint8_t *data, Py_ssize_t size, int64_t base_offset, int64_t base_timestamp,
                        int log_append, int64_t max_timestamp, int32_t count, int is_control, Buf *bufs) {
    Py_ssize_t mark[N_BUFS];
    for (int i = 0; i < N_BUFS; i++)
        mark[i] = bufs[i].used;
    Py_ssize_t pos = V2_HEADER_SIZE;
    for (int32_t r = 0; r < count; r++) {
        int64_t length, ts_delta, offset_delta, key_len, value_len, headers;
        if (!zigzag(data, &pos, size, &length))
            goto undo;
        if (length <= 0 || length > size - pos)
            goto undo;
        Py_ssize_t record_end = pos + (Py_ssize_t) length;
        pos += 1; /* record attributes (unused) */
        if (!zigzag(data, &pos, record_end, &ts_delta) || !zigzag(data, &pos, record_end, &offset_delta))
            goto undo;
        int64_t offset, timestamp = max_timestamp;
        if (__builtin_add_overflow(base_offset, offset_delta, &offset))
            goto undo;
        if (!log_append && __builtin_add_overflow(base_timestamp, ts_delta, &timestamp))
            goto undo;
        const uint8_t *key, *value;
        if (!nullable_bytes(data, &pos, record_end, &key_len, &key) ||
            !nullable_bytes(data, &pos, record_end, &value_len, &value))
            goto undo;
        if (!zigzag(data, &pos, record_end, &headers) || headers != 0 || pos != record_end)
            goto undo;
        int32_t klen = key_len < 0 ? -1 : (int32_t) key_len, vlen = value_len < 0 ? -1 : (int32_t) value_len;
        int16_t control = NOT_CONTROL;
        int64_t epoch = NO_EPOCH;
        if (is_control)
            control_of(key, klen, value, vlen, &control, &epoch);
        if (!buf_put(&bufs[R_OFFSET], &offset, 8) || !buf_put(&bufs[R_TIMESTAMP], &timestamp, 8) ||
            !buf_put(&bufs[R_CONTROL], &control, 2) || !buf_put(&bufs[R_COORDINATOR_EPOCH], &epoch, 8) ||
            !buf_put(&bufs[R_KEY_LEN], &klen, 4) || !buf_put(&bufs[R_VALUE_LEN], &vlen, 4) ||
            (klen > 0 && !buf_put(&bufs[KEY_DATA], key, klen)) ||
            (vlen > 0 && !buf_put(&bufs[VALUE_DATA], value, vlen)))
            return -1;
    }
    if (pos == size)
        return 1;
undo:
    for (int i = 0; i < N_BUFS; i++)
        bufs[i].used = mark[i];
    return 0;
}

/* An int or None; 0 with no exception set when the int is beyond int64 (then the Python walk judges). */
static int optional_int64(PyObject *obj, int *has, int64_t *value) {
    *has = 0;
    if (obj == Py_None)
        return 1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if ((v == -1 && PyErr_Occurred()) || overflow)
        return 0;
    *has = 1;
    *value = (int64_t) v;
    return 1;
}

static PyObject *walk_v2(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end, max_records;
    PyObject *expected_obj, *floor_obj, *next_obj;
    if (!PyArg_ParseTuple(args, "y*nnOOOn", &view, &pos, &end, &expected_obj, &floor_obj, &next_obj, &max_records))
        return NULL;
    int has_expected, has_floor, has_next;
    int64_t expected = 0, floor = 0, next_base = 0;
    if (!optional_int64(expected_obj, &has_expected, &expected) || !optional_int64(floor_obj, &has_floor, &floor) ||
        !optional_int64(next_obj, &has_next, &next_base)) {
        PyBuffer_Release(&view);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE; /* a bound beyond int64 (the offset after a batch ending at the largest long) */
    }
    if (end > view.len)
        end = view.len;
    const uint8_t *buf = (const uint8_t *) view.buf;
    Buf bufs[N_BUFS];
    memset(bufs, 0, sizeof bufs);
    Py_ssize_t batches = 0, records = 0;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    while (pos >= 0 && pos < end && records < max_records) {
        Py_ssize_t remaining = end - pos;
        if (remaining < V2_HEADER_SIZE)
            break;
        const uint8_t *b = buf + pos;
        int64_t base_offset = be64(b);
        int64_t length = be32(b + 8);
        if (b[16] != 2 || length < MIN_LENGTH || length > MAX_BATCH_LENGTH || LOG_OVERHEAD + length > remaining)
            break;
        Py_ssize_t size = LOG_OVERHEAD + (Py_ssize_t) length;
        if (crc32c(b + 21, (size_t) (size - 21)) != (uint32_t) be32(b + 17))
            break;
        int16_t attributes = be16(b + 21);
        if ((attributes & 0x07) != 0)
            break; /* compressed: the Python walk */
        int32_t count = be32(b + 57);
        int64_t last_offset;
        if (count < 0 || __builtin_add_overflow(base_offset, (int64_t) be32(b + 23), &last_offset) ||
            last_offset == INT64_MAX)
            break;
        if ((has_floor && base_offset < floor) || (has_next && last_offset >= next_base) ||
            (has_expected && base_offset < expected))
            break;
        int ok = read_records(b, size, base_offset, be64(b + 27), (attributes & 0x08) != 0, be64(b + 35), count,
                              (attributes & 0x20) != 0, bufs);
        if (ok < 0) {
            failed = 1;
            break;
        }
        if (!ok)
            break;
        int64_t position = (int64_t) pos, producer_id = be64(b + 43);
        int32_t epoch = be16(b + 51), attrs = attributes;
        if (!buf_put(&bufs[B_POSITION], &position, 8) || !buf_put(&bufs[B_BASE], &base_offset, 8) ||
            !buf_put(&bufs[B_LAST], &last_offset, 8) || !buf_put(&bufs[B_PRODUCER], &producer_id, 8) ||
            !buf_put(&bufs[B_EPOCH], &epoch, 4) || !buf_put(&bufs[B_ATTRIBUTES], &attrs, 4) ||
            !buf_put(&bufs[B_COUNT], &count, 4)) {
            failed = 1;
            break;
        }
        batches++;
        records += count;
        expected = last_offset + 1;
        has_expected = 1;
        pos += size;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (failed) {
        PyErr_NoMemory();
    } else if (batches == 0) {
        result = Py_None;
        Py_INCREF(result);
    } else {
        result = PyTuple_New(2 + N_BUFS);
        if (result) {
            PyTuple_SET_ITEM(result, 0, PyLong_FromSsize_t(pos));
            PyTuple_SET_ITEM(result, 1, PyLong_FromSsize_t(batches));
            for (int i = 0; i < N_BUFS; i++) {
                PyObject *bytes = PyBytes_FromStringAndSize(bufs[i].data ? bufs[i].data : "", bufs[i].used);
                if (!bytes) {
                    Py_CLEAR(result);
                    break;
                }
                PyTuple_SET_ITEM(result, 2 + i, bytes);
            }
        }
    }
    for (int i = 0; i < N_BUFS; i++)
        free(bufs[i].data);
    return result;
}

/* batch_ends(buf, pos, end) -> (ends, stop, invalid): the walk of batch headers segments.plan_ranges makes (as
 * complete_batch_ends reads them: base offset, length and magic; a known magic, a length at least that magic's
 * minimum, the batch whole before end) over buf[pos:end], the consecutive batches from pos. ``ends``: their end
 * positions as packed native int64; ``stop``: where the walk stopped; ``invalid``: 1 when at a header that cannot
 * be a batch's, 0 when the next header or batch is cut short by end (the caller reads on from stop, or the file
 * ends there). The caller hands the file a chunk at a time: the walk keeps no file in memory. */
static PyObject *batch_ends(PyObject *self, PyObject *args) {
    static const int64_t min_length[3] = {14, 22, MIN_LENGTH};
    Py_buffer view;
    Py_ssize_t pos, end;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &pos, &end))
        return NULL;
    if (end > view.len)
        end = view.len;
    const uint8_t *buf = (const uint8_t *) view.buf;
    Buf ends;
    memset(&ends, 0, sizeof ends);
    int failed = 0, invalid = 0;
    Py_BEGIN_ALLOW_THREADS
    while (pos >= 0 && pos + LOG_OVERHEAD + 5 <= end) {
        const uint8_t *b = buf + pos;
        int64_t length = be32(b + 8);
        uint8_t magic = b[16];
        if (magic > 2 || length < min_length[magic]) {
            invalid = 1;
            break;
        }
        if (pos + LOG_OVERHEAD + length > end)
            break;
        pos += LOG_OVERHEAD + (Py_ssize_t) length;
        int64_t at = (int64_t) pos;
        if (!buf_put(&ends, &at, sizeof at)) {
            failed = 1;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (failed)
        PyErr_NoMemory();
    else
        result = Py_BuildValue("(y#ni)", ends.data ? ends.data : "", ends.used, pos, invalid);
    free(ends.data);
    return result;
}

static PyObject *crc32c_py(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view))
        return NULL;
    uint32_t c = crc32c((const uint8_t *) view.buf, (size_t) view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

static PyMethodDef methods[] = {
    {"walk_v2", walk_v2, METH_VARARGS,
     "walk_v2(buf, pos, end, expected, floor, next_base_offset, max_records) -> None | (pos, batches, *columns)"},
    {"batch_ends", batch_ends, METH_VARARGS,
     "batch_ends(buf, pos, end) -> (ends, stop, invalid): segments.plan_ranges' walk of batch headers"},
    {"crc32c", crc32c_py, METH_VARARGS, "crc32c(data) -> int: the CRC32C walk_v2 checks batches with"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_segments_kernel", NULL, -1, methods};

PyMODINIT_FUNC PyInit__segments_kernel(void) {
    crc_init();
    return PyModule_Create(&module);
}
