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
#include "_event_walk.h"

enum { K_PYTHON, K_INT32, K_INT64, K_DOUBLE, K_BOOL, K_STRING, K_TIMESTAMP, K_BINARY, K_STRUCT,
       K_LIST, K_COUNT };

#define MISFIT 1    /* a value left to Python: its column is not built here */
#define MALFORMED 2 /* bytes that are no BSON document: nothing is built here */

/* datetime's years 1..9999 in ms since the epoch: outside them loads gives DatetimeMS. */
#define MIN_DATE_MS (-62135596800000LL)
#define MAX_DATE_MS (253402300799999LL)

typedef struct Col {
    int kind, failed;
    Py_ssize_t length, nulls;
    Out valid, data, offsets;
    Py_ssize_t count; /* a struct's fields (the plan's columns at the top), a list's 1 */
    struct Col *children;
    const char **names;
    Py_ssize_t *name_lens;
    Py_ssize_t hint; /* the field the next name most likely is: documents repeat their order */
} Col;

static void free_col(Col *c) {
    PyMem_Free(c->valid.buf);
    PyMem_Free(c->data.buf);
    PyMem_Free(c->offsets.buf);
    for (Py_ssize_t i = 0; c->children != NULL && i < c->count; i++) free_col(&c->children[i]);
    PyMem_Free(c->children);
    PyMem_Free(c->names);
    PyMem_Free(c->name_lens);
}

/* Bit `bit` of the bitmap o set to on (the bitmap grows a zeroed byte at a time). */
static int set_bit(Out *o, Py_ssize_t bit, int on) {
    if ((bit >> 3) >= o->len && put(o, "", 1)) return -1;
    if (on) o->buf[bit >> 3] |= (char)(1 << (bit & 7));
    return 0;
}

static int put_offset(Col *c, Py_ssize_t end) {
    if (end > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "bson_columns: a column passed 2 GiB");
        return -1;
    }
    int32_t v = (int32_t)end;
    return put(&c->offsets, (const char *)&v, 4); /* little-endian, as Arrow's */
}

static int end_row(Col *c, int valid) {
    if (set_bit(&c->valid, c->length, valid)) return -1;
    if (!valid) c->nulls++;
    c->length++;
    return 0;
}

static int add_null(Col *c) {
    static const char zeros[8] = {0};
    int rc = 0;
    switch (c->kind) {
    case K_INT32: rc = put(&c->data, zeros, 4); break;
    case K_INT64: case K_DOUBLE: case K_TIMESTAMP: rc = put(&c->data, zeros, 8); break;
    case K_BOOL: rc = set_bit(&c->data, c->length, 0); break;
    case K_STRING: case K_BINARY: rc = put_offset(c, c->data.len); break;
    case K_LIST: rc = put_offset(c, c->children[0].length); break;
    case K_STRUCT:
        for (Py_ssize_t i = 0; i < c->count && rc == 0; i++) rc = add_null(&c->children[i]);
        break;
    }
    return rc ? rc : end_row(c, 0);
}

typedef struct {
    unsigned char type;
    const char *name;
    Py_ssize_t name_len;
    const unsigned char *value;
    Py_ssize_t size;
} Element;

/* The next element of a document whose elements run from *pos to its final NUL at raw[end]
 * (_event_walk's framing): 1 (*pos past it), 0 at the end, -1 malformed. */
static int next_element(const unsigned char *raw, Py_ssize_t end, Py_ssize_t *pos, Element *e) {
    if (*pos >= end) return *pos == end && raw[end] == 0 ? 0 : -1;
    int kind;
    const unsigned char *name;
    Py_ssize_t value, after;
    if (raw[*pos] == 0 || element_at(raw, *pos, end, &kind, &name, &value, &after)) return -1;
    e->type = (unsigned char)kind;
    e->name = (const char *)name;
    e->name_len = value - 1 - (*pos + 1);
    e->value = raw + value;
    e->size = after - value;
    *pos = after;
    return 1;
}

/* The child of c named by e (-1: none). */
static Py_ssize_t find_child(Col *c, const Element *e) {
    for (Py_ssize_t k = 0; k < c->count; k++) {
        Py_ssize_t i = (c->hint + k) % c->count;
        if (c->name_lens[i] == e->name_len && memcmp(c->names[i], e->name, (size_t)e->name_len) == 0) {
            c->hint = i + 1 == c->count ? 0 : i + 1;
            return i;
        }
    }
    return -1;
}

static int add_value(Col *c, const Element *e);

static int add_struct(Col *c, const Element *e) {
    Element f;
    Py_ssize_t pos = 4;
    int rc;
    while ((rc = next_element(e->value, e->size - 1, &pos, &f)) == 1) {
        if (f.name_len > 0 && f.name[0] == '$') return MISFIT;
        Py_ssize_t i = find_child(c, &f);
        if (i < 0 || c->children[i].length > c->length) return MISFIT; /* unknown, or twice */
        if ((rc = add_value(&c->children[i], &f)) != 0) return rc;
    }
    if (rc < 0) return MALFORMED;
    for (Py_ssize_t i = 0; i < c->count; i++) {
        if (c->children[i].length == c->length && (rc = add_null(&c->children[i])) != 0) return rc;
    }
    return 0;
}

static int add_list(Col *c, const Element *e) {
    Element f;
    Py_ssize_t pos = 4;
    int rc;
    while ((rc = next_element(e->value, e->size - 1, &pos, &f)) == 1) {
        if ((rc = add_value(&c->children[0], &f)) != 0) return rc;
    }
    return rc < 0 ? MALFORMED : put_offset(c, c->children[0].length);
}

static int put_int64(Col *c, int64_t v) { return put(&c->data, (const char *)&v, 8); }

static int put_double(Col *c, double v) { return put(&c->data, (const char *)&v, 8); }

static int add_value(Col *c, const Element *e) {
    const unsigned char *p = e->value;
    unsigned char t = e->type;
    int rc;
    if (t == 0x0A) return add_null(c);
    switch (c->kind * 256 + t) {
    case K_INT32 * 256 + 0x10: rc = put(&c->data, (const char *)p, 4); break;
    case K_INT64 * 256 + 0x10: rc = put_int64(c, i32(p)); break;
    case K_INT64 * 256 + 0x12: rc = put(&c->data, (const char *)p, 8); break;
    case K_DOUBLE * 256 + 0x01: rc = put(&c->data, (const char *)p, 8); break;
    case K_DOUBLE * 256 + 0x10: rc = put_double(c, (double)i32(p)); break;
    case K_DOUBLE * 256 + 0x12: rc = put_double(c, (double)(int64_t)u64(p)); break;
    case K_BOOL * 256 + 0x08:
        if (p[0] > 1) return MISFIT;
        rc = set_bit(&c->data, c->length, p[0]);
        break;
    case K_STRING * 256 + 0x02:
        rc = put(&c->data, (const char *)p + 4, e->size - 5);
        if (rc == 0) rc = put_offset(c, c->data.len);
        break;
    case K_STRING * 256 + 0x07: {
        char hex[24];
        for (int i = 0; i < 12; i++) {
            hex[2 * i] = HEX[p[i] >> 4];
            hex[2 * i + 1] = HEX[p[i] & 15];
        }
        rc = put(&c->data, hex, 24);
        if (rc == 0) rc = put_offset(c, c->data.len);
        break;
    }
    case K_TIMESTAMP * 256 + 0x09: {
        int64_t ms = (int64_t)u64(p);
        if (ms < MIN_DATE_MS || ms > MAX_DATE_MS) return MISFIT;
        rc = put_int64(c, ms * 1000);
        break;
    }
    case K_BINARY * 256 + 0x05:
        if (p[4] != 0) return MISFIT; /* another subtype: a UUID is text, the rest Python's */
        rc = put(&c->data, (const char *)p + 5, e->size - 5);
        if (rc == 0) rc = put_offset(c, c->data.len);
        break;
    case K_STRUCT * 256 + 0x03: rc = add_struct(c, e); break;
    case K_LIST * 256 + 0x04: rc = add_list(c, e); break;
    default: return MISFIT;
    }
    return rc ? rc : end_row(c, 1);
}

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
