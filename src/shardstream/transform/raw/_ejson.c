/* Extended JSON from raw BSON, in C: the common case of extended_json.bson_to_json.
 *
 * dumps(raw, relaxed) returns the text json_util writes for the decoded document, or None
 * for anything it leaves to the Python walker in extended_json.py, which is the reference:
 * a subdocument holding "$ref" (pymongo may decode it to a DBRef and reorder it), a
 * Decimal128, invalid UTF-8, malformed or deeply nested bytes. The rules written here are
 * the walker's, checked against it by tests/transform/test_raw_extended_json.py.
 */
#include "_ejson_scalars.h"

/* Events nest no deeper than the entries they come from (bson_depth.MAX_NESTING, 200 below the
 * top), which every path checks; one level of margin, and deeper bytes go to the walker, which
 * refuses them with an OplogError. */
#define MAX_DEPTH 201

/* One value of BSON type kind at pos; *next is set past it. */
static int put_value(Out *o, const unsigned char *raw, Py_ssize_t len, int kind, Py_ssize_t pos,
                     Py_ssize_t end, int relaxed, int depth, Py_ssize_t *next) {
    char text[96];
    int n, rc;
    switch (kind) {
        case 0x02: /* string */
        case 0x0E: /* symbol: pymongo decodes it to str */
            return put_bson_string(o, raw, pos, end, next);
        case 0x10: /* int32 */
            if (pos + 4 > end) return FALLBACK;
            *next = pos + 4;
            return put_integer(o, i32(raw + pos), relaxed ? NULL : "{\"$numberInt\": \"");
        case 0x03:
        case 0x04:
            return put_document(o, raw, len, pos, relaxed, kind == 0x04, 0, depth + 1, next);
        case 0x01:
            if (pos + 8 > end) return FALLBACK;
            {
                double v;
                uint64_t bits = u64(raw + pos);
                memcpy(&v, &bits, 8);
                *next = pos + 8;
                return put_double(o, v, relaxed);
            }
        case 0x07:
            if (pos + 12 > end) return FALLBACK;
            *next = pos + 12;
            return put_oid(o, raw + pos);
        case 0x09:
            if (pos + 8 > end) return FALLBACK;
            *next = pos + 8;
            return put_date(o, (int64_t)u64(raw + pos), relaxed);
        case 0x08:
            if (pos + 1 > end || raw[pos] > 1) return FALLBACK;
            *next = pos + 1;
            return raw[pos] ? PUT(o, "true") : PUT(o, "false");
        case 0x12: /* int64 */
            if (pos + 8 > end) return FALLBACK;
            *next = pos + 8;
            return put_integer(o, (int64_t)u64(raw + pos), relaxed ? NULL : "{\"$numberLong\": \"");
        case 0x0A: /* null */
        case 0x06: /* undefined: pymongo decodes it to None */
            *next = pos;
            return PUT(o, "null");
        case 0x11: /* timestamp: increment, then time */
            if (pos + 8 > end) return FALLBACK;
            {
                uint64_t v = u64(raw + pos);
                n = snprintf(text, sizeof text, "{\"$timestamp\": {\"t\": %lu, \"i\": %lu}}",
                             (unsigned long)(v >> 32), (unsigned long)(v & 0xffffffffu));
            }
            *next = pos + 8;
            return put(o, text, n);
        case 0x05: { /* binary */
            if (pos + 5 > end) return FALLBACK;
            int32_t size = i32(raw + pos);
            int subtype = raw[pos + 4];
            Py_ssize_t data = pos + 5;
            if (size < 0 || data + size > end) return FALLBACK;
            if (subtype == 2) { /* the old subtype repeats the length inside */
                if (size < 4 || i32(raw + data) != size - 4) return FALLBACK;
                data += 4;
            }
            if (PUT(o, "{\"$binary\": {\"base64\": \"") || put_base64(o, raw + data, pos + 5 + size - data))
                return -1;
            n = snprintf(text, sizeof text, "\", \"subType\": \"%02x\"}}", subtype);
            *next = pos + 5 + size;
            return put(o, text, n);
        }
        case 0x0B: { /* regex: two C strings; the known flags, in json_util's order */
            const unsigned char *p = memchr(raw + pos, 0, end - pos);
            if (p == NULL) return FALLBACK;
            Py_ssize_t flags = p - raw + 1;
            const unsigned char *q = memchr(raw + flags, 0, end - flags);
            if (q == NULL) return FALLBACK;
            if (PUT(o, "{\"$regularExpression\": {\"pattern\": ")) return -1;
            rc = put_string(o, raw + pos, p - raw - pos);
            if (rc) return rc;
            if (PUT(o, ", \"options\": \"")) return -1;
            for (const char *f = "ilmsux"; *f; f++) {
                if (memchr(raw + flags, *f, q - raw - flags) && put(o, f, 1)) return -1;
            }
            *next = q - raw + 1;
            return PUT(o, "\"}}");
        }
        case 0x0D: /* code */
            if (PUT(o, "{\"$code\": ")) return -1;
            rc = put_bson_string(o, raw, pos, end, next);
            return rc ? rc : PUT(o, "}");
        case 0x0F: { /* code with scope: total size, code string, scope document */
            if (pos + 4 > end) return FALLBACK;
            int32_t total = i32(raw + pos);
            Py_ssize_t after;
            if (total < 14 || pos + total > end) return FALLBACK;
            if (PUT(o, "{\"$code\": ")) return -1;
            rc = put_bson_string(o, raw, pos + 4, pos + total, &after);
            if (rc) return rc;
            if (PUT(o, ", \"$scope\": ")) return -1;
            rc = put_document(o, raw, len, after, relaxed, 0, 0, depth + 1, next);
            if (rc) return rc;
            if (*next != pos + total) return FALLBACK;
            return PUT(o, "}");
        }
        case 0x0C: { /* DBPointer: pymongo decodes it to a DBRef */
            Py_ssize_t after;
            if (PUT(o, "{\"$ref\": ")) return -1;
            rc = put_bson_string(o, raw, pos, end, &after);
            if (rc) return rc;
            if (after + 12 > end) return FALLBACK;
            if (PUT(o, ", \"$id\": ") || put_oid(o, raw + after)) return -1;
            *next = after + 12;
            return PUT(o, "}");
        }
        case 0xFF:
            *next = pos;
            return PUT(o, "{\"$minKey\": 1}");
        case 0x7F:
            *next = pos;
            return PUT(o, "{\"$maxKey\": 1}");
        default: /* Decimal128 (0x13), unknown types: the walker */
            return FALLBACK;
    }
}

int put_document(Out *o, const unsigned char *raw, Py_ssize_t len, Py_ssize_t start, int relaxed,
                 int is_array, int top, int depth, Py_ssize_t *next) {
    if (depth > MAX_DEPTH || start + 5 > len) return FALLBACK;
    int32_t size = i32(raw + start);
    Py_ssize_t end = start + size - 1;
    if (size < 5 || end >= len || raw[end] != 0) return FALLBACK;
    if (!top && !is_array) {
        /* "$ref" as a name (or inside a value, which only costs the walker's time) */
        const unsigned char *p = raw + start + 4;
        while ((p = memchr(p, '$', raw + end - p)) != NULL) {
            if (raw + end - p >= 5 && memcmp(p, "$ref", 5) == 0) return FALLBACK;
            p++;
        }
    }
    if (put(o, is_array ? "[" : "{", 1)) return -1;
    Py_ssize_t pos = start + 4;
    int first = 1, rc;
    while (pos < end) {
        int kind = raw[pos];
        const unsigned char *nul = memchr(raw + pos + 1, 0, end - pos - 1);
        if (nul == NULL) return FALLBACK;
        if (!first && PUT(o, ", ")) return -1;
        first = 0;
        if (!is_array) {
            rc = put_string(o, raw + pos + 1, nul - raw - pos - 1);
            if (rc) return rc;
            if (PUT(o, ": ")) return -1;
        }
        rc = put_value(o, raw, len, kind, nul - raw + 1, end, relaxed, depth, &pos);
        if (rc) return rc;
    }
    if (pos != end) return FALLBACK;
    *next = end + 1;
    return put(o, is_array ? "]" : "}", 1);
}

static PyObject *dumps(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    int relaxed;
    if (!PyArg_ParseTuple(args, "y*p:dumps", &view, &relaxed)) return NULL;
    Out o = {NULL, 0, 0};
    Py_ssize_t next = 0;
    int rc = put_document(&o, view.buf, view.len, 0, relaxed, 0, 1, 0, &next);
    PyObject *result;
    if (rc == 0 && next == view.len) {
        result = PyUnicode_DecodeASCII(o.buf, o.len, "strict");
    } else if (rc >= 0) {
        result = Py_NewRef(Py_None);
    } else {
        result = NULL;
    }
    PyMem_Free(o.buf);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"dumps", dumps, METH_VARARGS,
     "dumps(raw, relaxed, /): Extended JSON of one BSON document, or None (the walker's case)."},
    {"event_fields", event_fields, METH_VARARGS,
     "event_fields(raw, relaxed, /): a change event's row fields, or None (the Python reader's case)."},
    {"event_columns", event_columns, METH_VARARGS,
     "event_columns(raws, relaxed, /): (Arrow buffers of the events' row fields, rows left to Python)."},
    {"split_fields", split_fields, METH_VARARGS,
     "split_fields(raw, names, /): (raw without the named top-level fields, their values), or "
     "None (the Python walk's case)."},
    {"valid_entry", (PyCFunction)(void (*)(void))valid_entry, METH_FASTCALL,
     "valid_entry(raw, max_nesting=200, /): whether the fast path may copy this BSON as it is "
     "(else: not sure)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ejson", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__ejson(void) { return PyModule_Create(&module); }
