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
 * One leniency, on purpose: the walk frames every field but validates only those it returns,
 * where RawBSONDocument decodes the whole top level. A field it skips holding invalid UTF-8,
 * a bool byte above 1 or a malformed code-with-scope makes the Python reader raise but not
 * this one. The events come from the project's own writers: the reference path's encoder, or
 * the fast path, which copies only bytes _bson_check.c has vouched for (valid, and nested
 * within the server's limit); this walk does not check those bytes again.
 */
#include "_ejson.h"

enum {
    OPERATION_TYPE,
    CLUSTER_TIME,
    WALL_TIME,
    NS,
    COLLECTION_UUID,
    DOCUMENT_KEY, /* the document columns, in encoded_rows.DOCUMENT_COLUMNS' order */
    FULL_DOCUMENT,
    UPDATE_DESCRIPTION,
    BEFORE_CHANGE,
    TO,
    OPERATION_DESCRIPTION,
    TXN_NUMBER,
    LSID,
    FIELDS
};

static const char *const FIELD_NAMES[FIELDS] = {
    "operationType", "clusterTime", "wallTime", "ns", "collectionUUID", "documentKey",
    "fullDocument", "updateDescription", "fullDocumentBeforeChange", "to",
    "operationDescription", "txnNumber", "lsid"};

static const char *const NS_NAMES[2] = {"db", "coll"};

#define MIN_DATETIME_MS (-62135596800000LL) /* 0001-01-01T00:00:00Z */
#define MAX_DATETIME_MS 253402300799999LL   /* 9999-12-31T23:59:59.999Z */

typedef struct {
    int kind; /* the BSON type byte; 0: absent */
    Py_ssize_t pos, end;
} Span;

/* Where a value of BSON type kind at pos ends (within end), or -1: malformed or unknown. */
static Py_ssize_t value_end(const unsigned char *raw, int kind, Py_ssize_t pos, Py_ssize_t end) {
    int64_t size;
    const unsigned char *p;
    switch (kind) {
        case 0x01: case 0x09: case 0x11: case 0x12: size = 8; break;
        case 0x10: size = 4; break;
        case 0x07: size = 12; break;
        case 0x08: size = 1; break;
        case 0x06: case 0x0A: case 0x7F: case 0xFF: size = 0; break;
        case 0x13: size = 16; break;
        case 0x02: case 0x0D: case 0x0E: case 0x0C: /* length-prefixed string (+ ObjectId) */
            if (pos + 4 > end) return -1;
            size = 4 + (int64_t)i32(raw + pos) + (kind == 0x0C ? 12 : 0);
            if (size < 5) return -1;
            break;
        case 0x03: case 0x04: case 0x0F:
            if (pos + 4 > end) return -1;
            size = i32(raw + pos);
            if (size < 5) return -1;
            break;
        case 0x05:
            if (pos + 5 > end) return -1;
            size = 5 + (int64_t)i32(raw + pos);
            if (size < 5) return -1;
            break;
        case 0x0B: /* regex: pattern and flags, two C strings */
            if ((p = memchr(raw + pos, 0, end - pos)) == NULL) return -1;
            p++;
            if ((p = memchr(p, 0, raw + end - p)) == NULL) return -1;
            return p - raw + 1;
        default:
            return -1;
    }
    return size > end - pos ? -1 : pos + (Py_ssize_t)size;
}

/* The spans of the named fields of the document at raw[start:] (the last one of a repeated
 * name, as a decoded dict keeps). 0, or FALLBACK when the bytes are not a document. */
static int find_fields(const unsigned char *raw, Py_ssize_t len, Py_ssize_t start,
                       const char *const *names, int count, Span *spans) {
    memset(spans, 0, sizeof(Span) * count);
    if (start + 5 > len) return FALLBACK;
    int32_t size = i32(raw + start);
    Py_ssize_t end = start + size - 1;
    if (size < 5 || end >= len || raw[end] != 0) return FALLBACK;
    Py_ssize_t pos = start + 4;
    while (pos < end) {
        int kind = raw[pos];
        const unsigned char *name = raw + pos + 1;
        const unsigned char *nul = memchr(name, 0, end - pos - 1);
        if (nul == NULL) return FALLBACK;
        Py_ssize_t value = nul - raw + 1, after = value_end(raw, kind, value, end);
        if (after < 0) return FALLBACK;
        for (int i = 0; i < count; i++) {
            if (strcmp((const char *)name, names[i]) == 0) {
                spans[i] = (Span){kind, value, after};
                break;
            }
        }
        pos = after;
    }
    return pos == end ? 0 : FALLBACK;
}

static int absent(Span s) { return s.kind == 0 || s.kind == 0x0A || s.kind == 0x06; }

/* A string field as str (None when absent or null). */
static int text(const unsigned char *raw, Span s, PyObject **out) {
    if (absent(s)) {
        *out = Py_NewRef(Py_None);
        return 0;
    }
    if (s.kind != 0x02 || raw[s.end - 1] != 0) return FALLBACK;
    *out = PyUnicode_DecodeUTF8((const char *)raw + s.pos + 4, s.end - s.pos - 5, "strict");
    if (*out == NULL) {
        PyErr_Clear();
        return FALLBACK;
    }
    return 0;
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

static PyObject *uuid_text(const unsigned char *raw, Span s) {
    char text[36];
    const unsigned char *b = raw + s.pos + 5;
    for (int i = 0, w = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) text[w++] = '-';
        text[w++] = HEX[b[i] >> 4], text[w++] = HEX[b[i] & 15];
    }
    return PyUnicode_DecodeASCII(text, 36, "strict");
}

/* The scalar fields (clusterTime, wallTime, collectionUUID, txnNumber) into items. */
static int scalars(const unsigned char *raw, const Span *f, PyObject **items) {
    Span t = f[CLUSTER_TIME], w = f[WALL_TIME], u = f[COLLECTION_UUID], n = f[TXN_NUMBER];
    int uuid = u.kind == 0x05 && raw[u.pos + 4] == 4;
    /* What sends the event to Python first, so that no value is made for nothing. */
    if (uuid && i32(raw + u.pos) != 16) return FALLBACK; /* as_uuid() refuses it: Python says so */
    if (n.kind != 0x10 && n.kind != 0x12 && !absent(n)) return FALLBACK;
    if (t.kind == 0x11) {
        uint64_t v = u64(raw + t.pos); /* increment, then time */
        items[1] = PyLong_FromUnsignedLong((unsigned long)(v >> 32));
        items[2] = PyLong_FromUnsignedLong((unsigned long)(v & 0xffffffffu));
    } else {
        items[1] = Py_NewRef(Py_None), items[2] = Py_NewRef(Py_None);
    }
    int64_t ms = w.kind == 0x09 ? (int64_t)u64(raw + w.pos) : 0;
    items[3] = w.kind == 0x09 && ms >= MIN_DATETIME_MS && ms <= MAX_DATETIME_MS
                   ? PyLong_FromLongLong(ms)
                   : Py_NewRef(Py_None);
    items[6] = uuid ? uuid_text(raw, u) : Py_NewRef(Py_None);
    items[13] = n.kind == 0x10   ? PyLong_FromLong(i32(raw + n.pos))
                : n.kind == 0x12 ? PyLong_FromLongLong((int64_t)u64(raw + n.pos))
                                 : Py_NewRef(Py_None);
    return items[1] && items[2] && items[3] && items[6] && items[13] ? 0 : -1;
}

static int fill(const unsigned char *raw, Py_ssize_t len, int relaxed, PyObject **items) {
    Span f[FIELDS], ns[2] = {{0, 0, 0}, {0, 0, 0}};
    if (len < 5 || i32(raw) != len) return FALLBACK; /* one whole document, nothing after it */
    int rc = find_fields(raw, len, 0, FIELD_NAMES, FIELDS, f);
    if (rc) return rc;
    if (f[NS].kind == 0x03 && (rc = find_fields(raw, len, f[NS].pos, NS_NAMES, 2, ns))) return rc;
    if ((rc = text(raw, f[OPERATION_TYPE], &items[0]))) return rc;
    if ((rc = scalars(raw, f, items))) return rc;
    if ((rc = text(raw, ns[0], &items[4])) || (rc = text(raw, ns[1], &items[5]))) return rc;
    for (int i = DOCUMENT_KEY; i <= OPERATION_DESCRIPTION; i++) {
        if ((rc = json(raw, len, f[i], relaxed, &items[7 + i - DOCUMENT_KEY]))) return rc;
    }
    return json(raw, len, f[LSID], relaxed, &items[14]);
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
