/*
 * Compiled fast path of the vectorised decoder (offsets_audit.codec.vectorised), optional like the other kernels.
 *
 * read_flat reads one flat message layout at per-row positions of a binary column, the way _Reader.struct reads
 * it, for the layouts whose untagged fields are fixed-width integers, bools and strings and whose tagged fields
 * (flexible versions) are fixed-width integers or uuids: offset commit keys and values, and most group records'
 * keys. It gives the values only, no JSON text (the caller builds none: codec.spark's json_text=False), and a row
 * is ok exactly where _Reader.struct leaves it ok and ends at the row's end: the same one- and two-byte varints,
 * the same length checks, the same strings (printable ASCII without a quote or backslash; any other string sends
 * the row to the generic decoder), the same tag checks. tests/test_codec_vectorised.py compares both readers.
 *
 * Field codes: 'b' int8, '?' bool (its byte as it is), 'h' int16, 'H' uint16, 'i' int32, 'I' uint32, 'q' int64,
 * 's' string, 'S' nullable string; a tagged field: one of the integer codes or 'u' (uuid, 16 bytes).
 *
 * Output, as bytes objects for numpy and Arrow (native endian): ok (one byte a row); per untagged field either the
 * values (int64 a row) or, for a string, (int32 offsets, characters, is-null bytes); per tagged field, for a uuid
 * (its Uuid.toString, 22 characters a row, and whether it is printed: present and not all zero), else (None,
 * present bytes). A row not ok has zeros and empty strings.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 64

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t more) {
    if (b->len + more <= b->cap)
        return 1;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    char *data = realloc(b->data, (size_t) cap);
    if (data == NULL)
        return 0;
    b->data = data;
    b->cap = cap;
    return 1;
}

static int width_of(char code) {
    switch (code) {
    case 'b': case '?': return 1;
    case 'h': case 'H': return 2;
    case 'i': case 'I': return 4;
    case 'q': return 8;
    case 'u': return 16;
    default: return 0;
    }
}

static int64_t read_fixed(const uint8_t *p, char code) {
    switch (code) {
    case 'b': return (int8_t) p[0];
    case '?': return p[0];
    case 'h': return (int16_t) (((uint16_t) p[0] << 8) | p[1]);
    case 'H': return (uint16_t) (((uint16_t) p[0] << 8) | p[1]);
    case 'i': return (int32_t) (((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) | ((uint32_t) p[2] << 8) | p[3]);
    case 'I': return (uint32_t) (((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) | ((uint32_t) p[2] << 8) | p[3]);
    default: {
        uint64_t v = 0;
        for (int k = 0; k < 8; k++)
            v = (v << 8) | p[k];
        return (int64_t) v;
    }
    }
}

/* _Reader.uvarint: one or two bytes, inside the row; returns 0 where _Reader's ok turns false. */
static int uvarint(const uint8_t *buf, int64_t *pos, int64_t end, int64_t *value) {
    if (*pos + 1 > end)
        return 0;
    uint8_t b0 = buf[*pos];
    if (b0 < 0x80) {
        *value = b0;
        *pos += 1;
        return 1;
    }
    if (*pos + 2 > end)
        return 0;
    uint8_t b1 = buf[*pos + 1];
    if (b1 >= 0x80)
        return 0;
    *value = (b0 & 0x7F) | ((int64_t) b1 << 7);
    *pos += 2;
    return 1;
}

static PyObject *read_flat(PyObject *self, PyObject *args) {
    Py_buffer data, starts_view, ends_view;
    const char *fields, *tag_codes;
    Py_ssize_t n_fields, n_tags;
    PyObject *tag_numbers;
    int flexible;
    Py_ssize_t max_tags;
    if (!PyArg_ParseTuple(args, "y*y*y*y#y#Opn", &data, &starts_view, &ends_view, &fields, &n_fields, &tag_codes,
                          &n_tags, &tag_numbers, &flexible, &max_tags))
        return NULL;
    PyObject *result = NULL;
    int64_t tags[MAX_FIELDS];
    Py_ssize_t m = starts_view.len / (Py_ssize_t) sizeof(int64_t);
    Buf values[MAX_FIELDS], chars[MAX_FIELDS], offsets[MAX_FIELDS], nulls[MAX_FIELDS], present[MAX_FIELDS],
        uuid_texts[MAX_FIELDS];
    Buf ok_buf = {0};
    memset(values, 0, sizeof values);
    memset(chars, 0, sizeof chars);
    memset(offsets, 0, sizeof offsets);
    memset(nulls, 0, sizeof nulls);
    memset(present, 0, sizeof present);
    memset(uuid_texts, 0, sizeof uuid_texts);
    if (n_fields > MAX_FIELDS || n_tags > MAX_FIELDS || !PyTuple_Check(tag_numbers) ||
        PyTuple_GET_SIZE(tag_numbers) != n_tags || ends_view.len != starts_view.len) {
        PyErr_SetString(PyExc_ValueError, "read_flat: bad layout or row arrays");
        goto done;
    }
    for (Py_ssize_t t = 0; t < n_tags; t++) {
        tags[t] = PyLong_AsLongLong(PyTuple_GET_ITEM(tag_numbers, t));
        if (tags[t] == -1 && PyErr_Occurred())
            goto done;
        if (width_of(tag_codes[t]) == 0) {
            PyErr_SetString(PyExc_ValueError, "read_flat: bad tagged field code");
            goto done;
        }
    }
    for (Py_ssize_t f = 0; f < n_fields; f++) {
        char code = fields[f];
        if (code != 's' && code != 'S' && (width_of(code) == 0 || code == 'u')) {
            PyErr_SetString(PyExc_ValueError, "read_flat: bad field code");
            goto done;
        }
    }
    const uint8_t *buf = (const uint8_t *) data.buf;
    const int64_t *starts = (const int64_t *) starts_view.buf, *ends = (const int64_t *) ends_view.buf;
    int failed = !buf_reserve(&ok_buf, m);
    for (Py_ssize_t f = 0; f < n_fields && !failed; f++) {
        if (fields[f] == 's' || fields[f] == 'S') {
            failed |= !buf_reserve(&offsets[f], (m + 1) * 4) || !buf_reserve(&nulls[f], m);
            if (!failed) {
                memset(offsets[f].data, 0, 4);
                offsets[f].len = 4;
            }
        } else {
            failed |= !buf_reserve(&values[f], m * 8);
        }
    }
    for (Py_ssize_t t = 0; t < n_tags && !failed; t++)
        failed |= !buf_reserve(&present[t], m) || (tag_codes[t] == 'u' && !buf_reserve(&uuid_texts[t], m * 22));
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t r = 0; r < m && !failed; r++) {
        int64_t pos = starts[r], end = ends[r];
        int ok = pos >= 0 && end >= pos && end <= data.len;
        int64_t tag_at[MAX_FIELDS], tag_size[MAX_FIELDS];
        for (Py_ssize_t t = 0; t < n_tags; t++)
            tag_at[t] = -1, tag_size[t] = 0;
        for (Py_ssize_t f = 0; f < n_fields; f++) {
            char code = fields[f];
            if (code == 's' || code == 'S') {
                int is_null = 0;
                int64_t n = 0, after = pos;
                if (ok && code == 'S') {
                    if (flexible)
                        is_null = pos + 1 <= end && buf[pos] == 0;
                    else
                        is_null = pos + 2 <= end && buf[pos] == 0xFF && buf[pos + 1] == 0xFF;
                }
                if (ok && !is_null) {
                    if (flexible) {
                        int64_t b;
                        ok = uvarint(buf, &after, end, &b) && b >= 1;
                        n = ok ? b - 1 : 0;
                    } else {
                        ok = pos + 2 <= end;
                        n = ok ? (int16_t) (((uint16_t) buf[pos] << 8) | buf[pos + 1]) : 0;
                        ok = ok && n >= 0;
                        after = pos + 2;
                    }
                    ok = ok && after + n <= end;
                    for (int64_t k = after; ok && k < after + n; k++) {
                        uint8_t c = buf[k];
                        ok = c >= 0x20 && c < 0x80 && c != 0x22 && c != 0x5C;
                    }
                }
                if (!ok || is_null)
                    n = 0;
                if (!buf_reserve(&chars[f], n)) {
                    failed = 1;
                    break;
                }
                if (n > 0) {
                    memcpy(chars[f].data + chars[f].len, buf + after, (size_t) n);
                    chars[f].len += n;
                }
                int32_t next = (int32_t) chars[f].len;
                memcpy(offsets[f].data + offsets[f].len, &next, 4);
                offsets[f].len += 4;
                nulls[f].data[nulls[f].len++] = (char) (ok && is_null);
                pos = is_null ? pos + (flexible ? 1 : 2) : after + n;
            } else {
                int w = width_of(code);
                int64_t v = 0;
                if (ok && pos + w <= end)
                    v = read_fixed(buf + pos, code);
                else
                    ok = 0;
                memcpy(values[f].data + values[f].len, &v, 8);
                values[f].len += 8;
                pos += w;
            }
        }
        if (failed)
            break;
        if (ok && flexible) {
            int64_t count = 0;
            ok = uvarint(buf, &pos, end, &count) && count <= max_tags;
            for (int64_t i = 0; ok && i < count; i++) {
                int64_t tag, size;
                ok = uvarint(buf, &pos, end, &tag) && uvarint(buf, &pos, end, &size) && pos + size <= end;
                Py_ssize_t t = 0;
                while (ok && t < n_tags && tags[t] != tag)
                    t++;
                ok = ok && t < n_tags && tag_at[t] < 0; /* an unknown or repeated tag: the generic path */
                if (ok) {
                    tag_at[t] = pos;
                    tag_size[t] = size;
                    pos += size;
                }
            }
            for (Py_ssize_t t = 0; ok && t < n_tags; t++)
                ok = tag_at[t] < 0 || tag_size[t] == width_of(tag_codes[t]);
        }
        ok = ok && pos == end;
        for (Py_ssize_t t = 0; t < n_tags; t++) {
            int here = ok && tag_at[t] >= 0;
            if (tag_codes[t] == 'u') {
                /* Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding; printed unless all zero */
                static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
                uint8_t id[18] = {0};
                if (here)
                    memcpy(id, buf + tag_at[t], 16);
                int printed = 0;
                for (int k = 0; k < 16; k++)
                    printed |= id[k] != 0;
                here = here && printed;
                Buf *text = &uuid_texts[t];
                for (int k = 0, at = 0; k < 18; k += 3) {
                    uint32_t bits = ((uint32_t) id[k] << 16) | ((uint32_t) id[k + 1] << 8) | id[k + 2];
                    char quad[4] = {alphabet[(bits >> 18) & 63], alphabet[(bits >> 12) & 63], alphabet[(bits >> 6) & 63],
                                    alphabet[bits & 63]};
                    for (int q = 0; q < 4 && at < 22; q++, at++)
                        text->data[text->len++] = quad[q];
                }
            }
            present[t].data[present[t].len++] = (char) here;
        }
        ok_buf.data[ok_buf.len++] = (char) ok;
    }
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *untagged = PyList_New(n_fields), *tagged = PyList_New(n_tags);
    if (untagged == NULL || tagged == NULL) {
        Py_XDECREF(untagged);
        Py_XDECREF(tagged);
        goto done;
    }
    for (Py_ssize_t f = 0; f < n_fields; f++) {
        PyObject *item;
        if (fields[f] == 's' || fields[f] == 'S')
            item = Py_BuildValue("(y#y#y#)", offsets[f].data, offsets[f].len, chars[f].data ? chars[f].data : "",
                                 chars[f].len, nulls[f].data ? nulls[f].data : "", nulls[f].len);
        else
            item = PyBytes_FromStringAndSize(values[f].data, values[f].len);
        if (item == NULL) {
            Py_DECREF(untagged);
            Py_DECREF(tagged);
            goto done;
        }
        PyList_SET_ITEM(untagged, f, item);
    }
    for (Py_ssize_t t = 0; t < n_tags; t++) {
        Buf *text = &uuid_texts[t];
        PyObject *item = tag_codes[t] == 'u'
            ? Py_BuildValue("(y#y#)", text->data ? text->data : "", text->len, present[t].data ? present[t].data : "",
                            present[t].len)
            : Py_BuildValue("(Oy#)", Py_None, present[t].data ? present[t].data : "", present[t].len);
        if (item == NULL) {
            Py_DECREF(untagged);
            Py_DECREF(tagged);
            goto done;
        }
        PyList_SET_ITEM(tagged, t, item);
    }
    result = Py_BuildValue("(y#NN)", ok_buf.data ? ok_buf.data : "", ok_buf.len, untagged, tagged);
done:
    for (int f = 0; f < MAX_FIELDS; f++) {
        free(values[f].data);
        free(chars[f].data);
        free(offsets[f].data);
        free(nulls[f].data);
        free(present[f].data);
        free(uuid_texts[f].data);
    }
    free(ok_buf.data);
    PyBuffer_Release(&data);
    PyBuffer_Release(&starts_view);
    PyBuffer_Release(&ends_view);
    return result;
}

static PyMethodDef methods[] = {
    {"read_flat", read_flat, METH_VARARGS,
     "read_flat(data, starts, ends, fields, tag_codes, tag_numbers, flexible, max_tags) -> (ok, untagged, tagged)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_flat_kernel", NULL, -1, methods};

PyMODINIT_FUNC PyInit__flat_kernel(void) {
    return PyModule_Create(&module);
}
