/* A change event's row fields read from its BSON in one walk, in C.
 *
 * event_fields(raw, relaxed) returns the values shardstream.spark.source.encoded_rows reads
 * from a RawBSONDocument of the event, as a tuple in this order:
 *
 *   operationType, clusterTime's t, clusterTime's i, wallTime (ms since the epoch),
 *   ns.db, ns.coll, collectionUUID (text), documentKey, fullDocument, updateDescription,
 *   fullDocumentBeforeChange, to, operationDescription, txnNumber, lsid
 *
 * the documents as Extended JSON text (put_document, as dumps writes each one alone). A field
 * absent or null is None; so are clusterTime when not a Timestamp (the caller takes the
 * token's), wallTime when not a date in datetime's range (years 1-9999), and collectionUUID
 * when not a subtype-4 binary. Anything else unusual (a document field of another type, a
 * Decimal128 or "$ref" inside a document, invalid UTF-8, malformed bytes) returns None for the
 * whole event: the Python reader, the reference, takes it. Both are held to the same rows by
 * tests/spark/test_rows.py and tests/spark/test_event_fields.py.
 *
 * The walk itself is _event_walk.c's, which _event_columns.c shares.
 *
 * One leniency, on purpose: the walk frames every field but validates only those it returns,
 * where RawBSONDocument decodes the whole top level. A field it skips holding invalid UTF-8,
 * a bool byte above 1 or a malformed code-with-scope makes the Python reader raise but not
 * this one. The events come from the project's own writers: the reference path's encoder, or
 * the fast path, which copies only bytes _bson_check.c has vouched for (valid, and nested
 * within the server's limit); this walk does not check those bytes again.
 */
#include "_event_walk.h"

/* A string field as str (None when absent or null). */
static int text(const unsigned char *raw, Span s, PyObject **out) {
    if (absent(s)) {
        *out = Py_NewRef(Py_None);
        return 0;
    }
    const char *bytes;
    Py_ssize_t n;
    int rc = string_bytes(raw, s, &bytes, &n);
    if (rc) return rc;
    *out = PyUnicode_DecodeUTF8(bytes, n, "strict");
    return *out == NULL ? -1 : 0;
}

/* A document field as Extended JSON text (None when absent or null). */
static int json(const unsigned char *raw, Py_ssize_t len, Span s, int relaxed, PyObject **out) {
    if (absent(s)) {
        *out = Py_NewRef(Py_None);
        return 0;
    }
    if (s.kind != 0x03) return FALLBACK;
    Out o = {NULL, 0, 0};
    Py_ssize_t next = 0;
    int rc = put_document(&o, raw, len, s.pos, relaxed, 0, 1, 0, &next);
    if (rc == 0 && next != s.end) rc = FALLBACK;
    if (rc == 0 && (*out = PyUnicode_DecodeASCII(o.buf, o.len, "strict")) == NULL) rc = -1;
    PyMem_Free(o.buf);
    return rc;
}

static PyObject *optional_long(int present, int64_t value) {
    return present ? PyLong_FromLongLong(value) : Py_NewRef(Py_None);
}

static int fill(const unsigned char *raw, Py_ssize_t len, int relaxed, PyObject **items) {
    EventWalk w;
    int rc = walk_event(raw, len, &w);
    if (rc) return rc;
    if ((rc = text(raw, w.f[OPERATION_TYPE], &items[0]))) return rc;
    items[1] = optional_long(w.has_time, w.time);
    items[2] = optional_long(w.has_time, w.inc);
    items[3] = optional_long(w.has_wall, w.wall_ms);
    items[6] = w.has_uuid ? PyUnicode_DecodeASCII(w.uuid, 36, "strict") : Py_NewRef(Py_None);
    items[13] = optional_long(w.has_txn, w.txn);
    if (!items[1] || !items[2] || !items[3] || !items[6] || !items[13]) return -1;
    if ((rc = text(raw, w.ns[0], &items[4])) || (rc = text(raw, w.ns[1], &items[5]))) return rc;
    for (int i = DOCUMENT_KEY; i <= OPERATION_DESCRIPTION; i++) {
        if ((rc = json(raw, len, w.f[i], relaxed, &items[7 + i - DOCUMENT_KEY]))) return rc;
    }
    return json(raw, len, w.f[LSID], relaxed, &items[14]);
}

#define ITEMS 15

PyObject *event_fields(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    int relaxed;
    if (!PyArg_ParseTuple(args, "y*p:event_fields", &view, &relaxed)) return NULL;
    PyObject *items[ITEMS] = {NULL};
    int rc = fill(view.buf, view.len, relaxed, items);
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (rc == 0 && (result = PyTuple_New(ITEMS)) != NULL) {
        for (int i = 0; i < ITEMS; i++) PyTuple_SET_ITEM(result, i, items[i]);
        return result;
    }
    for (int i = 0; i < ITEMS; i++) Py_XDECREF(items[i]);
    return rc > 0 ? Py_NewRef(Py_None) : NULL;
}
