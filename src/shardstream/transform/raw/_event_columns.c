/* Many change events' row fields as Arrow buffers, in C: rows without a Python object each.
 *
 * event_columns(raws, relaxed) reads the events (a list of BSON bytes) in order, with the walk
 * _event_fields.c uses, and returns (columns, left): a row per item, in columns in this order:
 *
 *   _id (the token's _data), _idTypeBits (its _typeBits as upper-case hex), operationType,
 *   clusterTime's t, clusterTime's i, wallTime (us since the epoch), ns.db, ns.coll,
 *   collectionUUID, the six document columns (encoded_rows.DOCUMENT_COLUMNS), txnNumber, lsid
 *
 * (a string column as (validity, offsets, data), an int64 column as (validity, data): the
 * buffers of an Arrow array, validity None when no value is null), and the rows it left to
 * the caller, null in every column. The values are the ones event_fields returns (the token's
 * _id read from the event's own _id). It leaves the events event_fields leaves to Python, an
 * item that is not bytes (an event the caller has as a dict), and an event whose clusterTime
 * is not a Timestamp (the row takes the token's) or whose _id is not a document with a string
 * _data. A column past Arrow's 2 GiB raises OverflowError (the task's batches are cut at
 * 64 MiB of BSON, which Extended JSON makes at most ~6 times longer).
 *
 * tests/spark/test_event_batches.py holds the batches built from these buffers to the ones
 * built from the Python reader's rows.
 */
#include "_event_walk.h"

enum {
    C_ID, C_TYPE_BITS, C_OPERATION_TYPE, C_TIME, C_INC, C_WALL, C_DB, C_COLL, C_UUID,
    C_DOCUMENTS, /* six of them, DOCUMENT_KEY .. OPERATION_DESCRIPTION */
    C_TXN = C_DOCUMENTS + 6, C_LSID, COLUMNS
};

static const char *const ID_NAMES[2] = {"_data", "_typeBits"};

typedef struct {
    Out data, offsets, valid; /* offsets: int32 per row plus one (string columns only) */
    Py_ssize_t nulls;
    int is_int;
} Column;

static int is_int_column(int c) { return c == C_TIME || c == C_INC || c == C_WALL || c == C_TXN; }

/* Row `row`'s validity bit (the bitmap grows a byte at a time, zeroed). */
static int mark(Column *c, Py_ssize_t row, int valid) {
    if ((row >> 3) >= c->valid.len && put(&c->valid, "", 1)) return -1;
    if (valid) {
        c->valid.buf[row >> 3] |= (char)(1 << (row & 7));
    } else {
        c->nulls++;
    }
    return 0;
}

/* The string column's end offset for the row just written. */
static int close_string(Column *c, Py_ssize_t row, int valid) {
    if (c->data.len > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "event_columns: a column passed 2 GiB");
        return -1;
    }
    int32_t end = (int32_t)c->data.len;
    if (put(&c->offsets, (const char *)&end, 4)) return -1; /* little-endian, as Arrow's */
    return mark(c, row, valid);
}

static int add_text(Column *c, Py_ssize_t row, const unsigned char *raw, Span s) {
    if (absent(s)) return close_string(c, row, 0);
    const char *bytes;
    Py_ssize_t n;
    int rc = string_bytes(raw, s, &bytes, &n);
    if (rc) return rc;
    if (put(&c->data, bytes, n)) return -1;
    return close_string(c, row, 1);
}

static int add_json(Column *c, Py_ssize_t row, const unsigned char *raw, Py_ssize_t len, Span s,
                    int relaxed) {
    if (absent(s)) return close_string(c, row, 0);
    if (s.kind != 0x03) return FALLBACK;
    Py_ssize_t next = 0;
    int rc = put_document(&c->data, raw, len, s.pos, relaxed, 0, 1, 0, &next);
    if (rc) return rc;
    return next == s.end ? close_string(c, row, 1) : FALLBACK;
}

static int add_int(Column *c, Py_ssize_t row, int present, int64_t value) {
    if (!present) value = 0;
    if (put(&c->data, (const char *)&value, 8)) return -1;
    return mark(c, row, present);
}

/* _typeBits as upper-case hex (the payload of a binary; null when absent). */
static int add_type_bits(Column *c, Py_ssize_t row, const unsigned char *raw, Span s) {
    if (absent(s)) return close_string(c, row, 0);
    if (s.kind != 0x05) return FALLBACK;
    static const char UPPER[] = "0123456789ABCDEF";
    const unsigned char *b = raw + s.pos + 5;
    Py_ssize_t n = s.end - s.pos - 5;
    if (grow(&c->data, 2 * n)) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        c->data.buf[c->data.len++] = UPPER[b[i] >> 4];
        c->data.buf[c->data.len++] = UPPER[b[i] & 15];
    }
    return close_string(c, row, 1);
}

static int add_row(Column *cols, Py_ssize_t row, const unsigned char *raw, Py_ssize_t len,
                   int relaxed) {
    EventWalk w;
    Span id[2];
    int rc = walk_event(raw, len, &w);
    if (rc) return rc;
    if (!w.has_time || w.f[ID].kind != 0x03) return FALLBACK;
    if ((rc = find_fields(raw, len, w.f[ID].pos, ID_NAMES, 2, id))) return rc;
    if (absent(id[0])) return FALLBACK;
    if ((rc = add_text(&cols[C_ID], row, raw, id[0]))) return rc;
    if ((rc = add_type_bits(&cols[C_TYPE_BITS], row, raw, id[1]))) return rc;
    if ((rc = add_text(&cols[C_OPERATION_TYPE], row, raw, w.f[OPERATION_TYPE]))) return rc;
    if ((rc = add_int(&cols[C_TIME], row, 1, w.time))) return rc;
    if ((rc = add_int(&cols[C_INC], row, 1, w.inc))) return rc;
    int64_t wall_us = w.has_wall ? w.wall_ms * 1000 : 0; /* in range: no overflow */
    if ((rc = add_int(&cols[C_WALL], row, w.has_wall, wall_us))) return rc;
    if ((rc = add_text(&cols[C_DB], row, raw, w.ns[0]))) return rc;
    if ((rc = add_text(&cols[C_COLL], row, raw, w.ns[1]))) return rc;
    Column *uuid = &cols[C_UUID];
    if (w.has_uuid && put(&uuid->data, w.uuid, 36)) return -1;
    if ((rc = close_string(uuid, row, w.has_uuid))) return rc;
    for (int i = 0; i < 6; i++) {
        rc = add_json(&cols[C_DOCUMENTS + i], row, raw, len, w.f[DOCUMENT_KEY + i], relaxed);
        if (rc) return rc;
    }
    if ((rc = add_int(&cols[C_TXN], row, w.has_txn, w.txn))) return rc;
    return add_json(&cols[C_LSID], row, raw, len, w.f[LSID], relaxed);
}

/* Back to `rows` rows: what a row left half written is cut off, its null counts restored. */
static void truncate_to(Column *cols, Py_ssize_t rows, const Py_ssize_t *nulls) {
    for (int i = 0; i < COLUMNS; i++) {
        Column *c = &cols[i];
        if (c->is_int) {
            c->data.len = rows * 8;
        } else {
            c->offsets.len = (rows + 1) * 4;
            int32_t end;
            memcpy(&end, c->offsets.buf + rows * 4, 4);
            c->data.len = end;
        }
        c->valid.len = (rows + 7) >> 3;
        if (rows & 7) c->valid.buf[rows >> 3] &= (char)((1 << (rows & 7)) - 1);
        c->nulls = nulls[i];
    }
}

/* A row of nulls where an event is left to the caller. */
static int add_placeholder(Column *cols, Py_ssize_t row) {
    for (int i = 0; i < COLUMNS; i++) {
        int rc = cols[i].is_int ? add_int(&cols[i], row, 0, 0) : close_string(&cols[i], row, 0);
        if (rc) return -1; /* no data was added: only memory can fail */
    }
    return 0;
}

static int list_append_index(PyObject *list, Py_ssize_t index) {
    PyObject *value = PyLong_FromSsize_t(index);
    int rc = value == NULL ? -1 : PyList_Append(list, value);
    Py_XDECREF(value);
    return rc;
}

static PyObject *bytes_of(const Out *o) {
    return PyBytes_FromStringAndSize(o->buf ? o->buf : "", o->len);
}

static PyObject *column_buffers(const Column *c) {
    PyObject *valid = c->nulls ? bytes_of(&c->valid) : Py_NewRef(Py_None);
    if (valid == NULL) return NULL;
    if (c->is_int) return Py_BuildValue("(NN)", valid, bytes_of(&c->data));
    return Py_BuildValue("(NNN)", valid, bytes_of(&c->offsets), bytes_of(&c->data));
}

PyObject *event_columns(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *list;
    int relaxed;
    if (!PyArg_ParseTuple(args, "O!p:event_columns", &PyList_Type, &list, &relaxed)) return NULL;
    Column cols[COLUMNS];
    memset(cols, 0, sizeof cols);
    PyObject *result = NULL, *columns = NULL, *left = NULL;
    Py_ssize_t rows = 0, total = PyList_GET_SIZE(list), nulls[COLUMNS];
    int32_t zero = 0;
    for (int i = 0; i < COLUMNS; i++) {
        cols[i].is_int = is_int_column(i);
        if (!cols[i].is_int && put(&cols[i].offsets, (const char *)&zero, 4)) goto done;
    }
    if ((left = PyList_New(0)) == NULL) goto done;
    for (; rows < total; rows++) {
        PyObject *item = PyList_GET_ITEM(list, rows);
        int rc = FALLBACK;
        for (int i = 0; i < COLUMNS; i++) nulls[i] = cols[i].nulls;
        if (PyBytes_Check(item)) {
            rc = add_row(cols, rows, (const unsigned char *)PyBytes_AS_STRING(item),
                         PyBytes_GET_SIZE(item), relaxed);
        }
        if (rc < 0) goto done;
        if (rc == 0) continue;
        truncate_to(cols, rows, nulls);
        if (add_placeholder(cols, rows) || list_append_index(left, rows)) goto done;
    }
    if ((columns = PyTuple_New(COLUMNS)) == NULL) goto done;
    for (int i = 0; i < COLUMNS; i++) {
        PyObject *buffers = column_buffers(&cols[i]);
        if (buffers == NULL) goto done;
        PyTuple_SET_ITEM(columns, i, buffers);
    }
    result = Py_BuildValue("(OO)", columns, left);
done:
    Py_XDECREF(columns);
    Py_XDECREF(left);
    for (int i = 0; i < COLUMNS; i++) {
        PyMem_Free(cols[i].data.buf), PyMem_Free(cols[i].offsets.buf);
        PyMem_Free(cols[i].valid.buf);
    }
    return result;
}
