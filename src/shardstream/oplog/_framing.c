/* Skipping over BSON documents by their length prefixes, in C: the hot loop of ts_index.
 *
 * skip(data, position, entries, before, largest) walks the documents framed in `data` from
 * byte `position`: it passes at most `entries` of them, and none that starts at or after
 * byte `before`, and stops early at a length prefix outside [5, largest] or at a document
 * that `data` does not hold whole. It returns (position, passed, last), where `position`
 * is where it stopped, `passed` how many documents it passed and `last` the start of the
 * last one (-1: none). What it stops on (a bad prefix, a cut document, the next sample) is
 * the caller's to read: ts_index's Python loop, which holds the same rules and is the
 * reference (tests/oplog/test_ts_index.py checks the two give the same index).
 *
 * Why: a planner indexes every file it plans windows over, reading every entry's length;
 * in Python that loop cost ~2 us an entry, the driver's largest cost per event.
 *
 * sample_ts(data, position, size) reads the top-level Timestamp `ts` of the document of
 * `size` bytes at `position` as (time << 32) | inc, walking its top level as pymongo's
 * RawBSONDocument does to read it. It vouches only for what it is sure that reading gives
 * without an error: every top-level element of a type whose bounds it checks as pymongo
 * does (arrays and the rarer types excluded), names and strings in ASCII (pymongo decodes
 * them as strict UTF-8), exactly one way to end, and a `ts` of type Timestamp (the last
 * one, as a dict keeps it). Anything else returns None, and ts_index's Python reading
 * (the reference) gives the verdict: the value or the defect's message.
 * Why: decoding each sampled entry's top level in Python (~6 us, one in 32 entries) was
 * most of an index's cost, paid by the driver (the progress's source time) and by the
 * planner, each time a process meets a file.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static PyObject *skip(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t position, entries, before, largest;
    if (!PyArg_ParseTuple(args, "y*nnnn", &view, &position, &entries, &before, &largest))
        return NULL;
    const unsigned char *data = (const unsigned char *)view.buf;
    Py_ssize_t length = view.len, passed = 0, last = -1;
    if (position < 0) position = 0;
    while (passed < entries && position < before && length - position >= 4) {
        const unsigned char *p = data + position;
        int32_t size = (int32_t)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                                 ((uint32_t)p[3] << 24));
        if (size < 5 || (Py_ssize_t)size > largest || (Py_ssize_t)size > length - position)
            break;
        last = position;
        position += size;
        passed++;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("nnn", position, passed, last);
}

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

static PyObject *sample_ts(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t position, size;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &position, &size)) return NULL;
    const unsigned char *data = (const unsigned char *)view.buf;
    int found = 0, clean = 0;
    unsigned long long key = 0;
    if (position >= 0 && size >= 5 && size <= view.len - position &&
        read_int32(data + position) == size && data[position + size - 1] == 0) {
        const unsigned char *p = data + position + 4, *end = data + position + size - 1;
        clean = 1;
        while (p < end) {
            unsigned char type = *p++;
            const unsigned char *name = p;
            while (p < end && *p != 0) p++;
            if (p >= end || !ascii(name, p - name)) { clean = 0; break; }
            Py_ssize_t name_length = p - name;
            p++; /* the name's NUL */
            Py_ssize_t value = value_size(type, p, end);
            if (value < 0) { clean = 0; break; }
            if (name_length == 2 && name[0] == 't' && name[1] == 's') {
                if (type != 0x11) { clean = 0; break; }
                found = 1; /* increment, then seconds: both little-endian uint32 */
                key = ((unsigned long long)(uint32_t)read_int32(p + 4) << 32) |
                      (uint32_t)read_int32(p);
            }
            p += value;
        }
        if (p != end) clean = 0;
    }
    PyBuffer_Release(&view);
    if (!clean || !found) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(key);
}

static PyMethodDef methods[] = {
    {"skip", skip, METH_VARARGS, "Pass over framed BSON documents (see the module comment)."},
    {"sample_ts", sample_ts, METH_VARARGS,
     "A document's top-level Timestamp ts as an integer, or None (see the module comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_framing", NULL, -1, methods};

PyMODINIT_FUNC PyInit__framing(void) { return PyModule_Create(&module); }
