/* A collection's typed columns read from its documents' BSON, in C: Arrow buffers, without a
 * Python object per value (rows.py's fold check and projection, where they are certain).
 *
 * bson_columns(raws, plan) reads the documents (a list of BSON bytes, or None: a row null in
 * every column) and returns (columns, unknown), or None when an item is not a BSON document:
 *
 *   columns: per column of plan, (length, nulls, validity, buffers, children), the parts of
 *            its Arrow array (validity None when no value is null; buffers: (data,) for a
 *            fixed-width or bool column, (offsets, data) for string and binary, (offsets,) for
 *            a list, () for a struct; children: the struct's fields' or the list's elements'
 *            parts); or None: a column this module does not build (see below);
 *   unknown: the rows holding a non-null top-level field that plan does not name.
 *
 * plan: a tuple of (name: bytes (UTF-8), spec); spec: (kind, detail), kind one of the K_
 * values below, detail a struct's own tuple of (name, spec), a list's element spec, or None.
 *
 * A column is built only when every value is of a BSON type whose Python value (as
 * token_json.loads decodes a document's canonical Extended JSON, and bson.encode writes it
 * back) the column holds by rows.py's rules, converted as they convert it: int32 into int32,
 * int64 and double columns; int64 into int64 and double; double; bool (0 or 1); string, and
 * ObjectId as its lower-case hex, into string; a date within datetime's years 1..9999 into
 * timestamp[us] (ms * 1000); binary subtype 0; a document whose every field is one of the
 * struct's (no name starting with '$': a DBRef is no struct); an array. Null is null anywhere.
 * Any other value (Decimal128, a UUID, a date out of range, a field the struct lacks, a
 * duplicate name, ...) leaves its column to Python, which decides it value by value with the
 * same rules: the outcome is the same either way, this module only saves the work where the
 * answer is certain. tests/spark/test_bson_columns.py holds the two to each other.
 */
#include "_column_builder.h"

/* c made from spec (see the module); -1 with an error set on a malformed plan. */
static int build(Col *c, PyObject *spec) {
    int kind;
    PyObject *detail;
    if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "iO", &kind, &detail)) return -1;
    if (kind < 0 || kind >= K_COUNT) {
        PyErr_Format(PyExc_ValueError, "bson_columns: expected a column kind, got %d", kind);
        return -1;
    }
    c->kind = kind;
    c->failed = kind == K_PYTHON;
    if ((kind == K_STRING || kind == K_BINARY || kind == K_LIST) && put_offset(c, 0)) return -1;
    if (kind == K_LIST) {
        c->count = 1;
        c->children = PyMem_Calloc(1, sizeof(Col));
        if (c->children == NULL) return PyErr_NoMemory(), -1;
        if (build(&c->children[0], detail)) return -1;
        c->failed = c->children[0].failed; /* a list is built whole or not */
        return 0;
    }
    if (kind != K_STRUCT) return 0;
    if (!PyTuple_Check(detail)) {
        PyErr_SetString(PyExc_TypeError, "bson_columns: a struct's fields must be a tuple");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(detail);
    c->children = PyMem_Calloc(n ? n : 1, sizeof(Col));
    c->names = PyMem_Calloc(n ? n : 1, sizeof(char *));
    c->name_lens = PyMem_Calloc(n ? n : 1, sizeof(Py_ssize_t));
    if (c->children == NULL || c->names == NULL || c->name_lens == NULL) return PyErr_NoMemory(), -1;
    c->count = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *field = PyTuple_GET_ITEM(detail, i), *name, *child;
        if (!PyTuple_Check(field) || !PyArg_ParseTuple(field, "SO", &name, &child)) return -1;
        c->names[i] = PyBytes_AS_STRING(name);
        c->name_lens[i] = PyBytes_GET_SIZE(name);
        if (build(&c->children[i], child)) return -1;
        if (c->children[i].failed) c->failed = 1; /* a struct or list is built whole or not */
    }
    if (c->count == 0) c->failed = 1;
    return 0;
}

static PyObject *bytes_of(const Out *o) { return PyBytes_FromStringAndSize(o->buf ? o->buf : "", o->len); }

/* The parts of a built column (see the module). */
static PyObject *result(const Col *c) {
    PyObject *valid = c->nulls ? bytes_of(&c->valid) : Py_NewRef(Py_None);
    PyObject *buffers = NULL, *children = PyTuple_New(c->kind == K_STRUCT || c->kind == K_LIST ? c->count : 0);
    if (valid == NULL || children == NULL) goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(children); i++) {
        PyObject *child = result(&c->children[i]);
        if (child == NULL) goto fail;
        PyTuple_SET_ITEM(children, i, child);
    }
    switch (c->kind) {
    case K_STRING: case K_BINARY:
        buffers = Py_BuildValue("(NN)", bytes_of(&c->offsets), bytes_of(&c->data));
        break;
    case K_LIST: buffers = Py_BuildValue("(N)", bytes_of(&c->offsets)); break;
    case K_STRUCT: buffers = PyTuple_New(0); break;
    default: buffers = Py_BuildValue("(N)", bytes_of(&c->data)); break;
    }
    if (buffers == NULL) goto fail;
    return Py_BuildValue("(nnNNN)", c->length, c->nulls, valid, buffers, children);
fail:
    Py_XDECREF(valid);
    Py_XDECREF(children);
    return NULL;
}

/* One document (raw[0:size]) as row `row` of the top's columns; unknown gets the row when it
 * holds a non-null field no column names. 0, MALFORMED, or -1 with an error set. */
static int add_row(Col *top, Py_ssize_t row, const unsigned char *raw, Py_ssize_t size,
                   PyObject *unknown) {
    if (size < 5 || i32(raw) != size || raw[size - 1] != 0) return MALFORMED;
    Element e;
    Py_ssize_t pos = 4;
    int rc, listed = 0;
    while ((rc = next_element(raw, size - 1, &pos, &e)) == 1) {
        Py_ssize_t i = find_child(top, &e);
        if (i < 0) {
            if (e.type != 0x0A && !listed) {
                PyObject *index = PyLong_FromSsize_t(row);
                if (index == NULL || PyList_Append(unknown, index)) return Py_XDECREF(index), -1;
                Py_DECREF(index);
                listed = 1;
            }
            continue;
        }
        Col *c = &top->children[i];
        if (c->failed) continue;
        if (c->length > row) { /* a name twice: Python's dict keeps one, say which */
            c->failed = 1;
            continue;
        }
        rc = add_value(c, &e);
        if (rc == MISFIT) c->failed = 1;
        else if (rc) return rc;
    }
    return rc < 0 ? MALFORMED : 0;
}

static PyObject *bson_columns(PyObject *self, PyObject *args) {
    PyObject *raws, *plan;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &raws, &PyTuple_Type, &plan)) return NULL;
    Col top = {0};
    PyObject *unknown = PyList_New(0), *columns = NULL, *found = NULL;
    PyObject *spec = Py_BuildValue("(iO)", K_STRUCT, plan);
    if (unknown == NULL || spec == NULL || build(&top, spec)) goto done;
    Py_ssize_t rows = PyList_GET_SIZE(raws);
    for (Py_ssize_t row = 0; row < rows; row++) {
        PyObject *item = PyList_GET_ITEM(raws, row);
        int rc = 0;
        if (item != Py_None) {
            if (!PyBytes_Check(item)) {
                PyErr_SetString(PyExc_TypeError, "bson_columns: expected bytes or None");
                goto done;
            }
            rc = add_row(&top, row, (const unsigned char *)PyBytes_AS_STRING(item),
                         PyBytes_GET_SIZE(item), unknown);
        }
        if (rc == MALFORMED) {
            found = Py_NewRef(Py_None);
            goto done;
        }
        if (rc) goto done;
        for (Py_ssize_t i = 0; i < top.count; i++) { /* the fields this row lacks */
            Col *c = &top.children[i];
            if (!c->failed && c->length == row && (rc = add_null(c)) != 0) goto done;
        }
    }
    columns = PyTuple_New(top.count);
    if (columns == NULL) goto done;
    for (Py_ssize_t i = 0; i < top.count; i++) {
        PyObject *column = top.children[i].failed ? Py_NewRef(Py_None) : result(&top.children[i]);
        if (column == NULL) goto done;
        PyTuple_SET_ITEM(columns, i, column);
    }
    found = Py_BuildValue("(OO)", columns, unknown);
done:
    free_col(&top);
    Py_XDECREF(spec);
    Py_XDECREF(columns);
    Py_XDECREF(unknown);
    return found;
}

static PyMethodDef methods[] = {
    {"bson_columns", bson_columns, METH_VARARGS,
     "bson_columns(raws, plan, /): (columns, unknown rows), or None (see the module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bson_columns", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__bson_columns(void) { return PyModule_Create(&module); }
