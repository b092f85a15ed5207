/* write_statement(raw, /): a change event's target write, built from the event's bytes.
 *
 * The sync turns each insert, replace, update and delete event into one statement of the
 * target's `update` or `delete` command (apply_rules.py says which and why). Decoding each
 * event into Python objects, planning it there and having pymongo encode the write again was
 * most of the sync's CPU per event (benchmarks/README.md, "Write statements from the events'
 * bytes"); here the statement is written from the event's own bytes in one pass.
 *
 * Returns None (the event is planned in Python, apply_rules.plan_event, which gives the same
 * statement or the error) unless raw is one whole event that bson_check vouches for, so that
 * decoding it and encoding the parts back gives these very bytes, and:
 *   operationType is insert, replace, update or delete; ns holds string db and coll;
 *   _id is {_data: <string>}; clusterTime is a Timestamp; documentKey is a document with an
 *   _id; lsid and txnNumber are both null or absent, or a document and an int32/int64;
 *   an insert or replace has a document fullDocument; an update's rawUpdateDescription is
 *   {$v: 2, diff: {...}} whose sections and entries _update_pipeline.c reads as
 *   diff_to_pipeline.py does (anything it would refuse or read loosely takes the Python walk).
 * Else a tuple (kind, db, coll, route, statement, token, time, lsid, txnNumber):
 *   kind 0 replace-upsert, 1 update, 2 delete; route as apply_rules.route_of gives it;
 *   statement the BSON apply_rules.statement_of writes for the same event; token the
 *   _id as a dict; time the clusterTime as (seconds << 32 | increment); lsid the lsid's
 *   BSON and txnNumber an int, or both None.
 */
#include "_bson_out.h"

/* _update_pipeline.c: the diff at raw[diff:] as the pipeline's stages, into an open array. */
int put_update_pipeline(Out *o, const unsigned char *raw, Py_ssize_t diff);

#define MAX_NESTING 200 /* as bson_check.py: BSONDepth::kDefaultMaxAllowableDepth */

enum { F_ID, F_OP, F_TIME, F_NS, F_KEY, F_DOC, F_RAW_UPDATE, F_LSID, F_TXN, F_COUNT };

static const char *const FIELD_NAMES[F_COUNT] = {
    "_id", "operationType", "clusterTime", "ns", "documentKey", "fullDocument",
    "rawUpdateDescription", "lsid", "txnNumber"};
static const char *const NS_NAMES[2] = {"db", "coll"};
static const char *const ID_NAMES[1] = {"_id"};
static const char *const UPDATE_NAMES[2] = {"$v", "diff"};

/* Whether $v is 2 as apply_rules reads it (== 2: an int32, int64 or double). */
static int is_two(const unsigned char *raw, Span v) {
    if (v.kind == 0x10) return i32(raw + v.pos) == 2;
    if (v.kind == 0x12) return u64(raw + v.pos) == 2;
    if (v.kind != 0x01) return 0;
    uint64_t bits = u64(raw + v.pos);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d == 2.0;
}

/* The update's `u`: its pipeline, when rawUpdateDescription is {$v: 2, diff}. */
static int put_update(Out *o, const unsigned char *raw, Py_ssize_t len, Span update) {
    Span parts[2];
    if (update.kind != 0x03 || find_fields(raw, len, update.pos, UPDATE_NAMES, 2, parts)) {
        return FALLBACK;
    }
    if (!is_two(raw, parts[0]) || parts[1].kind != 0x03) return FALLBACK;
    Py_ssize_t array = open_element(o, 0x04, "u");
    if (array < 0) return -1;
    int rc = put_update_pipeline(o, raw, parts[1].pos);
    return rc ? rc : close_doc(o, array);
}

/* -- the event -------------------------------------------------------------------------------- */

/* A string span as a str; NULL without an error where it is not strict UTF-8 (the event is
 * then planned in Python, whose decoder names what is wrong). */
static PyObject *text(const unsigned char *raw, Span s) {
    PyObject *decoded =
        PyUnicode_DecodeUTF8((const char *)raw + s.pos + 4, s.end - s.pos - 5, "strict");
    if (decoded == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
    return decoded;
}

/* The last db (or coll) name read and its str: a stream's events name few namespaces, and
 * decoding the same name for each was a tenth of this walk. Only touched with the GIL held. */
typedef struct {
    char bytes[64];
    Py_ssize_t n;
    PyObject *name;
} NameCache;

static NameCache db_names, coll_names;

static PyObject *cached_text(NameCache *cache, const unsigned char *raw, Span s) {
    Py_ssize_t n = s.end - s.pos - 5;
    const char *p = (const char *)raw + s.pos + 4;
    if (cache->name != NULL && cache->n == n && memcmp(cache->bytes, p, n) == 0) {
        return Py_NewRef(cache->name);
    }
    PyObject *name = text(raw, s);
    if (name != NULL && n <= (Py_ssize_t)sizeof cache->bytes) {
        Py_XSETREF(cache->name, Py_NewRef(name));
        memcpy(cache->bytes, p, n);
        cache->n = n;
    }
    return name;
}

static int is_text(const unsigned char *raw, Span s, const char *want) {
    Py_ssize_t n = (Py_ssize_t)strlen(want); /* the span's own length: it may hold a NUL */
    return s.end - s.pos - 5 == n && memcmp(raw + s.pos + 4, want, n) == 0;
}

static int kind_of(const unsigned char *raw, Span op) {
    if (op.kind != 0x02) return -1;
    if (is_text(raw, op, "insert") || is_text(raw, op, "replace")) return 0;
    if (is_text(raw, op, "update")) return 1;
    if (is_text(raw, op, "delete")) return 2;
    return -1;
}

/* The statement's bytes into o: 0, FALLBACK or -1. */
static int put_statement(Out *o, const unsigned char *raw, Py_ssize_t len, int kind,
                         const Span *f) {
    Span key = f[F_KEY];
    Py_ssize_t doc = open_doc(o);
    if (doc < 0 || put_value(o, "q", raw, 0x03, key.pos, key.end)) return -1;
    if (kind == 0) {
        Span full = f[F_DOC];
        if (full.kind != 0x03) return FALLBACK;
        if (put_value(o, "u", raw, 0x03, full.pos, full.end)) return -1;
        if (head(o, 0x08, "upsert") || put(o, "\x01", 1)) return -1;
    } else if (kind == 1) {
        int rc = put_update(o, raw, len, f[F_RAW_UPDATE]);
        if (rc) return rc;
    } else if (put_int32(o, "limit", 1)) {
        return -1;
    }
    return close_doc(o, doc);
}

/* apply_rules.route_of from the key's bytes: an ObjectId's 12 bytes behind 0x07, else the
 * BSON of {_id: value} (what encoding the decoded value gives: bson_check vouched). */
static PyObject *route_of(const unsigned char *raw, Span id) {
    if (id.kind == 0x07) {
        char tagged[13] = {7};
        memcpy(tagged + 1, raw + id.pos, 12);
        return PyBytes_FromStringAndSize(tagged, 13);
    }
    Py_ssize_t size = 4 + 1 + 4 + (id.end - id.pos) + 1;
    PyObject *route = PyBytes_FromStringAndSize(NULL, size);
    if (route == NULL) return NULL;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(route);
    for (int i = 0; i < 4; i++) out[i] = (unsigned char)((uint32_t)size >> (8 * i));
    out[4] = (unsigned char)id.kind;
    memcpy(out + 5, "_id", 4);
    memcpy(out + 9, raw + id.pos, id.end - id.pos);
    out[size - 1] = 0;
    return route;
}

static PyObject *data_key; /* "_data", interned at import */

/* The token dict when _id is exactly {_data: <string>}; else NULL (with an error only when
 * one is set: MemoryError). */
static PyObject *token_of(const unsigned char *raw, Span id) {
    if (id.kind != 0x03 || id.end - id.pos < 12) return NULL;
    const unsigned char *p = raw + id.pos;
    if (p[4] != 0x02 || memcmp(p + 5, "_data", 6) != 0) return NULL;
    Span data = {0x02, id.pos + 11, value_end(raw, 0x02, id.pos + 11, id.end - 1)};
    if (data.end != id.end - 1 || raw[id.end - 1] != 0) return NULL;
    PyObject *value = text(raw, data);
    if (value == NULL) return NULL;
    PyObject *token = PyDict_New();
    if (token == NULL || PyDict_SetItem(token, data_key, value) < 0) Py_CLEAR(token);
    Py_DECREF(value);
    return token;
}

/* The statement's buffer, kept between calls (the GIL is held throughout each). */
static Out out;

/* The result tuple; NULL with an error set if one of the parts is NULL. */
static PyObject *result_of(PyObject **parts, Py_ssize_t n) {
    PyObject *tuple = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (parts[i] == NULL) goto done;
    }
    if ((tuple = PyTuple_New(n)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTuple_SET_ITEM(tuple, i, parts[i]);
        parts[i] = NULL;
    }
done:
    for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(parts[i]);
    return tuple;
}

static PyObject *planned(const unsigned char *raw, Py_ssize_t len) {
    Span f[F_COUNT], ns[2], id[1];
    if (!bson_valid(raw, len, MAX_NESTING) || find_fields(raw, len, 0, FIELD_NAMES, F_COUNT, f)) {
        Py_RETURN_NONE;
    }
    int kind = kind_of(raw, f[F_OP]);
    if (kind < 0 || f[F_NS].kind != 0x03 || f[F_TIME].kind != 0x11 || f[F_KEY].kind != 0x03) {
        Py_RETURN_NONE;
    }
    if (find_fields(raw, len, f[F_NS].pos, NS_NAMES, 2, ns) || ns[0].kind != 0x02 ||
        ns[1].kind != 0x02 || find_fields(raw, len, f[F_KEY].pos, ID_NAMES, 1, id) || !id[0].kind) {
        Py_RETURN_NONE;
    }
    Span lsid = f[F_LSID], txn = f[F_TXN];
    int in_transaction = !absent(lsid) && !absent(txn);
    if (in_transaction && (lsid.kind != 0x03 || (txn.kind != 0x10 && txn.kind != 0x12))) {
        Py_RETURN_NONE;
    }
    out.len = 0;
    int rc = put_statement(&out, raw, len, kind, f);
    if (rc) {
        if (rc == FALLBACK) Py_RETURN_NONE;
        return NULL;
    }
    /* The statement's bytes first: the parts after it allocate containers, and whatever a
     * collection they trigger runs must find `out` free to use. */
    PyObject *statement = PyBytes_FromStringAndSize(out.buf, out.len);
    if (statement == NULL) return NULL;
    uint64_t time = u64(raw + f[F_TIME].pos); /* increment, then seconds: seconds << 32 | inc */
    int64_t number = txn.kind == 0x10 ? i32(raw + txn.pos) : (int64_t)u64(raw + txn.pos);
    PyObject *parts[9] = {
        PyLong_FromLong(kind),
        cached_text(&db_names, raw, ns[0]),
        cached_text(&coll_names, raw, ns[1]),
        route_of(raw, id[0]),
        statement,
        token_of(raw, f[F_ID]),
        PyLong_FromUnsignedLongLong((unsigned long long)time),
        in_transaction ? PyBytes_FromStringAndSize((const char *)raw + lsid.pos, lsid.end - lsid.pos)
                       : Py_NewRef(Py_None),
        in_transaction ? PyLong_FromLongLong(number) : Py_NewRef(Py_None),
    };
    PyObject *result = result_of(parts, 9);
    if (result == NULL && !PyErr_Occurred()) Py_RETURN_NONE; /* a part Python must read */
    return result;
}

static PyObject *write_statement(PyObject *self, PyObject *arg) {
    (void)self;
    if (PyBytes_CheckExact(arg)) {
        return planned((const unsigned char *)PyBytes_AS_STRING(arg), PyBytes_GET_SIZE(arg));
    }
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = planned(view.buf, view.len);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"write_statement", write_statement, METH_O,
     "write_statement(raw, /): (kind, db, coll, route, statement, token, time, lsid, txnNumber) "
     "of a change event's target write, or None (planned in Python)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_write_statements", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__write_statements(void) {
    if (data_key == NULL && (data_key = PyUnicode_InternFromString("_data")) == NULL) return NULL;
    return PyModule_Create(&module);
}
