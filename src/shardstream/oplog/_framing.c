/* The hot loop of ts_index, in C: framing BSON documents by their length prefixes and
 * reading the sampled ones' `ts`.
 *
 * index_run(data, position, count, base, largest, stride, sample_bytes, clock_bits, times,
 * offsets, ordinals) walks the documents framed in `data` from byte `position` (`count`
 * documents of the file before it, `data[0]` at file offset `base`). A document is a
 * sample when it is the file's first, the `stride`-th after the last sample, or starts
 * `sample_bytes` or more after it (the lists' last items); a sample's `ts` key, offset
 * and ordinal are appended to the three lists. It stops before the first document it
 * cannot pass cleanly: fewer than 4 bytes left, a length prefix outside [5, largest], a
 * document `data` does not hold whole, or a sample whose `ts` top_level_ts does not vouch
 * for, that has a bit of `clock_bits` set, or that does not increase. It returns
 * (position, count, last): where it stopped, the documents counted so far, and the start
 * of the last document passed (-1: none). What it stops on is ts_index's Python loop's to
 * read, which holds the same rules and is the reference (tests/oplog/test_ts_index.py
 * checks the two give the same index, defects included).
 *
 * sample_ts(data, position, size): the same reading of one document's `ts` (None where it
 * does not vouch), by itself: tests/oplog/test_sampled_ts.py holds it to pymongo's reading.
 *
 * top_level_ts reads the top-level Timestamp `ts` as (time << 32) | inc, walking the top
 * level as pymongo's RawBSONDocument does to read it. It vouches only for what it is sure
 * that reading gives without an error: every top-level element of a type whose bounds it
 * checks as pymongo does (arrays and the rarer types excluded), names and strings in ASCII
 * (pymongo decodes them as strict UTF-8), the document ending where its length says, and a
 * `ts` of type Timestamp (the last one, as a dict keeps it). Anything else is left to
 * ts_index's Python reading (the reference), which gives the value or the defect's message.
 *
 * Why: a planner indexes every file it plans windows over, and the driver each file of a
 * bounded ingest (the progress's source time): in Python, framing cost ~2 us an entry and
 * decoding a sample's top level ~6 us (one in 32 entries), the driver's largest cost per
 * event.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static int32_t read_int32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                     ((uint32_t)p[3] << 24));
}

static int ascii(const unsigned char *p, Py_ssize_t length) {
    for (Py_ssize_t i = 0; i < length; i++)
        if (p[i] >= 0x80) return 0;
    return 1;
}

/* Bytes of the value of type `type` at `p` (its end at most `end`); -1: not vouched for. */
static Py_ssize_t value_size(unsigned char type, const unsigned char *p, const unsigned char *end) {
    Py_ssize_t room = end - p;
    int32_t length;
    switch (type) {
    case 0x01: case 0x09: case 0x11: case 0x12: return room >= 8 ? 8 : -1;
    case 0x10: return room >= 4 ? 4 : -1;
    case 0x07: return room >= 12 ? 12 : -1;
    case 0x13: return room >= 16 ? 16 : -1;
    case 0x0A: case 0x7F: case 0xFF: return 0;
    case 0x08: return room >= 1 && p[0] <= 1 ? 1 : -1;
    case 0x02: /* int32 length (with the NUL), the bytes, a NUL */
        if (room < 4) return -1;
        length = read_int32(p);
        if (length < 1 || length > room - 4 || p[4 + length - 1] != 0) return -1;
        return ascii(p + 4, length - 1) ? 4 + (Py_ssize_t)length : -1;
    case 0x03: /* a document, kept raw: its length and last byte checked */
        if (room < 5) return -1;
        length = read_int32(p);
        if (length < 5 || length > room || p[length - 1] != 0) return -1;
        return length;
    case 0x05: /* int32 length, subtype, bytes; subtype 2's inner length left to pymongo */
        if (room < 5) return -1;
        length = read_int32(p);
        if (length < 0 || length > room - 5 || p[4] == 0x02) return -1;
        return 5 + (Py_ssize_t)length;
    default: return -1;
    }
}

/* The top-level Timestamp `ts` of the document of `size` bytes at `doc`; *vouched is 0
 * where pymongo's reading is to decide (see the module comment). */
static unsigned long long top_level_ts(const unsigned char *doc, Py_ssize_t size, int *vouched) {
    int found = 0;
    unsigned long long key = 0;
    *vouched = 0;
    if (size < 5 || read_int32(doc) != size || doc[size - 1] != 0) return 0;
    const unsigned char *p = doc + 4, *end = doc + size - 1;
    while (p < end) {
        unsigned char type = *p++;
        const unsigned char *name = p;
        while (p < end && *p != 0) p++;
        if (p >= end || !ascii(name, p - name)) return 0;
        Py_ssize_t name_length = p - name;
        p++; /* the name's NUL */
        Py_ssize_t value = value_size(type, p, end);
        if (value < 0) return 0;
        if (name_length == 2 && name[0] == 't' && name[1] == 's') {
            if (type != 0x11) return 0;
            found = 1; /* increment, then seconds: both little-endian uint32 */
            key = ((unsigned long long)(uint32_t)read_int32(p + 4) << 32) |
                  (uint32_t)read_int32(p);
        }
        p += value;
    }
    *vouched = found && p == end;
    return key;
}

static PyObject *sample_ts(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t position, size;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &position, &size)) return NULL;
    int vouched = 0;
    unsigned long long key = 0;
    if (position >= 0 && size >= 5 && size <= view.len - position)
        key = top_level_ts((const unsigned char *)view.buf + position, size, &vouched);
    PyBuffer_Release(&view);
    if (!vouched) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(key);
}

/* The last item of `list` as a C integer (0: the list is empty). */
static unsigned long long last_item(PyObject *list) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    return n ? PyLong_AsUnsignedLongLong(PyList_GET_ITEM(list, n - 1)) : 0;
}

static int append_owned(PyObject *list, PyObject *item) {
    if (item == NULL) return -1;
    int failed = PyList_Append(list, item);
    Py_DECREF(item);
    return failed;
}

static PyObject *index_run(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t position, count, base, largest, stride, sample_bytes;
    unsigned long long clock_bits;
    PyObject *times, *offsets, *ordinals;
    if (!PyArg_ParseTuple(args, "y*nnnnnnKO!O!O!", &view, &position, &count, &base, &largest,
                          &stride, &sample_bytes, &clock_bits, &PyList_Type, &times,
                          &PyList_Type, &offsets, &PyList_Type, &ordinals))
        return NULL;
    const unsigned char *data = (const unsigned char *)view.buf;
    Py_ssize_t length = view.len, last = -1;
    int sampled = PyList_GET_SIZE(ordinals) > 0;
    unsigned long long last_time = last_item(times);
    Py_ssize_t last_offset = (Py_ssize_t)last_item(offsets);
    Py_ssize_t last_ordinal = (Py_ssize_t)last_item(ordinals);
    if (PyErr_Occurred()) goto failed;
    if (position < 0) position = 0;
    while (length - position >= 4) {
        int32_t size = read_int32(data + position);
        if (size < 5 || (Py_ssize_t)size > largest || (Py_ssize_t)size > length - position)
            break;
        Py_ssize_t at = base + position;
        if (!sampled || count - last_ordinal >= stride || at - last_offset >= sample_bytes) {
            int vouched;
            unsigned long long key = top_level_ts(data + position, size, &vouched);
            if (!vouched || (key & clock_bits) || (sampled && key <= last_time)) break;
            if (append_owned(times, PyLong_FromUnsignedLongLong(key)) ||
                append_owned(offsets, PyLong_FromSsize_t(at)) ||
                append_owned(ordinals, PyLong_FromSsize_t(count)))
                goto failed;
            sampled = 1;
            last_time = key;
            last_offset = at;
            last_ordinal = count;
        }
        last = position;
        position += size;
        count++;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("nnn", position, count, last);
failed:
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"index_run", index_run, METH_VARARGS,
     "Frame and sample documents into the index's lists (see the module comment)."},
    {"sample_ts", sample_ts, METH_VARARGS,
     "A document's top-level Timestamp ts as an integer, or None (see the module comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_framing", NULL, -1, methods};

PyMODINIT_FUNC PyInit__framing(void) { return PyModule_Create(&module); }
