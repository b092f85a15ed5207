/* split_fields(raw, names, /): one BSON document without some of its top-level fields, and
 * those fields, for a reader that wants most of an event decoded but a large field kept as the
 * bytes it is (the sync hands an insert's fullDocument to the target as it came).
 *
 * Returns (rest, values): rest is raw with each named element cut out and its length prefix
 * set to the new size; values holds, per name in order, None (absent) or (type byte, the
 * value's bytes). None for the whole call, the Python walk's case (event_split.py), when raw
 * is not one whole document framed element by element, holds a regex or a DBPointer (which
 * that walk does not size), or holds a named field twice (a decoded dict keeps the last; a
 * cut would keep the first). Nothing is validated beyond the framing: the caller decodes rest,
 * and a value it keeps as bytes must come from a writer that vouched for it. Names must be
 * distinct, non-empty and without NUL (ValueError), at most MAX_NAMES of them. */
#include "_event_walk.h"

#define MAX_NAMES 8

typedef struct {
    Py_ssize_t start, end; /* an element cut out, from its type byte to its value's end */
} Cut;

/* Frame raw's top level, noting the named elements: 0, or FALLBACK. */
static int find_cuts(const unsigned char *raw, Py_ssize_t len, const char *const *names,
                     Py_ssize_t count, Span *found, Cut *cuts, Py_ssize_t *ncuts) {
    if (len < 5 || i32(raw) != len || raw[len - 1] != 0) return FALLBACK;
    Py_ssize_t pos = 4, end = len - 1;
    while (pos < end) {
        int kind;
        const unsigned char *name;
        Py_ssize_t value, after;
        if (element_at(raw, pos, end, &kind, &name, &value, &after)) return FALLBACK;
        if (kind == 0x0B || kind == 0x0C) return FALLBACK;
        for (Py_ssize_t i = 0; i < count; i++) {
            if (is_named(name, names[i])) {
                if (found[i].kind) return FALLBACK; /* twice */
                found[i] = (Span){kind, value, after};
                cuts[(*ncuts)++] = (Cut){pos, after};
                break;
            }
        }
        pos = after;
    }
    return pos == end ? 0 : FALLBACK;
}

static PyObject *rest_of(const unsigned char *raw, Py_ssize_t len, const Cut *cuts, Py_ssize_t n) {
    Py_ssize_t size = len;
    for (Py_ssize_t i = 0; i < n; i++) size -= cuts[i].end - cuts[i].start;
    PyObject *rest = PyBytes_FromStringAndSize(NULL, size);
    if (rest == NULL) return NULL;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(rest);
    Py_ssize_t from = 0, w = 0;
    for (Py_ssize_t i = 0; i < n; i++) { /* the cuts are in the document's order */
        memcpy(out + w, raw + from, cuts[i].start - from);
        w += cuts[i].start - from, from = cuts[i].end;
    }
    memcpy(out + w, raw + from, len - from);
    uint32_t u = (uint32_t)size;
    for (int i = 0; i < 4; i++) out[i] = (unsigned char)(u >> (8 * i));
    return rest;
}

static PyObject *values_of(const unsigned char *raw, const Span *found, Py_ssize_t count) {
    PyObject *values = PyTuple_New(count);
    if (values == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = found[i].kind == 0
                             ? Py_NewRef(Py_None)
                             : Py_BuildValue("(iy#)", found[i].kind, (const char *)raw + found[i].pos,
                                             found[i].end - found[i].pos);
        if (item == NULL) {
            Py_DECREF(values);
            return NULL;
        }
        PyTuple_SET_ITEM(values, i, item);
    }
    return values;
}

PyObject *split_fields(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    PyObject *names;
    if (!PyArg_ParseTuple(args, "y*O!:split_fields", &view, &PyTuple_Type, &names)) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    const char *wanted[MAX_NAMES];
    PyObject *result = NULL;
    if (count > MAX_NAMES) {
        PyErr_Format(PyExc_ValueError, "expected at most %d names, got %zd", MAX_NAMES, count);
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        Py_ssize_t size = 0;
        if (!PyUnicode_Check(name) || (wanted[i] = PyUnicode_AsUTF8AndSize(name, &size)) == NULL ||
            size == 0 || (Py_ssize_t)strlen(wanted[i]) != size) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "expected distinct non-empty str names without NUL");
            }
            goto done;
        }
        for (Py_ssize_t j = 0; j < i; j++) {
            if (strcmp(wanted[i], wanted[j]) == 0) {
                PyErr_SetString(PyExc_ValueError, "expected distinct non-empty str names without NUL");
                goto done;
            }
        }
    }
    Span found[MAX_NAMES];
    Cut cuts[MAX_NAMES];
    Py_ssize_t ncuts = 0;
    memset(found, 0, sizeof found);
    const unsigned char *raw = view.buf;
    if (find_cuts(raw, view.len, wanted, count, found, cuts, &ncuts)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *rest = rest_of(raw, view.len, cuts, ncuts);
    PyObject *values = rest == NULL ? NULL : values_of(raw, found, count);
    if (values != NULL) result = PyTuple_Pack(2, rest, values);
    Py_XDECREF(rest);
    Py_XDECREF(values);
done:
    PyBuffer_Release(&view);
    return result;
}
