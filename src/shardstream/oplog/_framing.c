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

static PyMethodDef methods[] = {
    {"skip", skip, METH_VARARGS, "Pass over framed BSON documents (see the module comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_framing", NULL, -1, methods};

PyMODINIT_FUNC PyInit__framing(void) { return PyModule_Create(&module); }
