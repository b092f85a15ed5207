/* A document's canonical Extended JSON to its BSON, in C: what bson.encode(loads(text))
 * writes, without a Python object per value.
 *
 * document_bson(text, max_depth) returns the BSON bytes, or None for anything left to the
 * Python way (token_json.document_bson: loads, then bson.encode), which is the reference:
 * text that is not one JSON object, nested deeper than max_depth, a bare number, a type
 * wrapper other than {"$numberInt": s}, {"$numberLong": s}, {"$numberDouble": s},
 * {"$oid": s} and {"$date": {"$numberLong": s}} (each alone in its object, s written as the
 * canonical writer writes it), any other name starting with "$", a name twice in one object
 * (a dict keeps one), a name holding a NUL (BSON cannot), a top-level _id after another
 * name (bson.encode moves it to the front), a lone surrogate. Each wrapper is
 * written as the value loads makes of it encodes: int32, int64, double, ObjectId, date (a
 * date out of datetime's years is a DatetimeMS, the same milliseconds).
 *
 * Why: the lakehouse's typed tables need each version's BSON (its _doc, and the columns
 * _bson_columns.c reads from it); decoding the state's text into Python values and encoding
 * them again cost two thirds of a document's typing. tests/resume_token/test_json_bson.py
 * holds the two ways to each other.
 */
#include "_json_scan.h"

#include <stdint.h>
#include <stdlib.h>

#define UNSURE 1 /* left to the Python way */
#define MAX_NAMES 1000 /* names one object may hold here (duplicates are looked for) */

typedef struct {
    Scan s;
    char *out;
    Py_ssize_t len, cap;
    Py_ssize_t *names; /* (offset, length) in out of the names of the objects being written */
    Py_ssize_t count, room;
} Writer;

static int put(Writer *w, const void *bytes, Py_ssize_t n) {
    if (w->len + n > w->cap) {
        Py_ssize_t cap = w->cap ? w->cap : 512;
        while (cap < w->len + n) cap *= 2;
        char *b = PyMem_Realloc(w->out, cap);
        if (b == NULL) return PyErr_NoMemory(), -1;
        w->out = b;
        w->cap = cap;
    }
    memcpy(w->out + w->len, bytes, n);
    w->len += n;
    return 0;
}

static void put_at(Writer *w, Py_ssize_t at, int32_t v) { memcpy(w->out + at, &v, 4); }

static int write_value(Writer *w, Py_ssize_t type_at);

/* The wrapper's string value (its text as written: no escape); -1: not a plain string. */
static int wrapped_text(Writer *w, const char **text, Py_ssize_t *n) {
    if (w->s.p >= w->s.end || *w->s.p != '"') return -1;
    const char *start = w->s.p + 1, *q = start;
    while (q < w->s.end && *q != '"' && *q != '\\') q++;
    if (q >= w->s.end || *q != '"') return -1;
    *text = start;
    *n = q - start;
    w->s.p = q + 1;
    return 0;
}

/* An integer written as -?[0-9]+ within [low, high]; -1: not one. */
static int whole_number(const char *t, Py_ssize_t n, long long low, long long high,
                        long long *out) {
    int negative = n > 1 && t[0] == '-';
    if (n - negative < 1 || n - negative > 19) return -1; /* 19 digits cannot overflow */
    unsigned long long v = 0;
    for (Py_ssize_t i = negative; i < n; i++) {
        if (t[i] < '0' || t[i] > '9') return -1;
        v = v * 10 + (unsigned long long)(t[i] - '0');
    }
    if (v > (unsigned long long)INT64_MAX + (unsigned long long)negative) return -1;
    long long value = negative ? (long long)(0ULL - v) : (long long)v;
    if (value < low || value > high) return -1;
    *out = value;
    return 0;
}

/* A double as float() reads the canonical writer's text; -1: text left to Python. */
static int double_of(const char *t, Py_ssize_t n, double *out) {
    char digits[64];
    if (n == 8 && memcmp(t, "Infinity", 8) == 0) return *out = Py_HUGE_VAL, 0;
    if (n == 9 && memcmp(t, "-Infinity", 9) == 0) return *out = -Py_HUGE_VAL, 0;
    if (n == 3 && memcmp(t, "NaN", 3) == 0) {
        uint64_t bits = 0x7ff8000000000000ULL; /* float("nan"), as Python makes it */
        memcpy(out, &bits, 8);
        return 0;
    }
    if (n < 1 || n >= (Py_ssize_t)sizeof(digits)) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = t[i];
        if (!((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E'))
            return -1;
    }
    memcpy(digits, t, n);
    digits[n] = 0;
    char *end;
    *out = strtod(digits, &end); /* correctly rounded, as float() */
    return end == digits + n ? 0 : -1;
}

/* The value of a one-name object named `name` (starting with "$"): its BSON type at type_at
 * and its bytes; UNSURE: a wrapper left to Python. */
static int write_wrapper(Writer *w, const char *name, Py_ssize_t name_len, Py_ssize_t type_at) {
    const char *t;
    Py_ssize_t n;
    long long whole;
    double real;
    unsigned char type;
    if (name_len == 5 && memcmp(name, "$date", 5) == 0) { /* {"$numberLong": s} */
        if (w->s.p >= w->s.end || *w->s.p != '{') return UNSURE;
        w->s.p++;
        skip_space(&w->s);
        if (!literal(&w->s, "\"$numberLong\"", 13)) return UNSURE;
        skip_space(&w->s);
        if (!literal(&w->s, ":", 1)) return UNSURE;
        skip_space(&w->s);
        if (wrapped_text(w, &t, &n) || whole_number(t, n, INT64_MIN, INT64_MAX, &whole))
            return UNSURE;
        skip_space(&w->s);
        if (!literal(&w->s, "}", 1)) return UNSURE;
        int64_t v = (int64_t)whole;
        w->out[type_at] = 0x09;
        return put(w, &v, 8);
    }
    if (wrapped_text(w, &t, &n)) return UNSURE;
    if (name_len == 10 && memcmp(name, "$numberInt", 10) == 0) {
        if (whole_number(t, n, INT32_MIN, INT32_MAX, &whole)) return UNSURE;
        int32_t v = (int32_t)whole;
        type = 0x10;
        if (put(w, &v, 4)) return -1;
    } else if (name_len == 11 && memcmp(name, "$numberLong", 11) == 0) {
        if (whole_number(t, n, INT64_MIN, INT64_MAX, &whole)) return UNSURE;
        int64_t v = (int64_t)whole;
        type = 0x12;
        if (put(w, &v, 8)) return -1;
    } else if (name_len == 13 && memcmp(name, "$numberDouble", 13) == 0) {
        if (double_of(t, n, &real)) return UNSURE;
        type = 0x01;
        if (put(w, &real, 8)) return -1;
    } else if (name_len == 4 && memcmp(name, "$oid", 4) == 0) {
        unsigned char raw[12];
        if (n != 24) return UNSURE;
        for (int i = 0; i < 12; i++) {
            int high = hex_digit(t[2 * i]), low = hex_digit(t[2 * i + 1]);
            if (high < 0 || low < 0) return UNSURE;
            raw[i] = (unsigned char)(high << 4 | low);
        }
        type = 0x07;
        if (put(w, raw, 12)) return -1;
    } else {
        return UNSURE;
    }
    w->out[type_at] = (char)type;
    return 0;
}

/* A name just written at out[at:at+n]: UNSURE when the object has it already. */
static int new_name(Writer *w, Py_ssize_t base, Py_ssize_t at, Py_ssize_t n) {
    for (Py_ssize_t i = base; i < w->count; i++) {
        if (w->names[2 * i + 1] == n && memcmp(w->out + w->names[2 * i], w->out + at, n) == 0)
            return UNSURE;
    }
    if (w->count - base >= MAX_NAMES) return UNSURE;
    if (w->count == w->room) {
        Py_ssize_t room = w->room ? w->room * 2 : 64;
        Py_ssize_t *names = PyMem_Realloc(w->names, room * 2 * sizeof(Py_ssize_t));
        if (names == NULL) return PyErr_NoMemory(), -1;
        w->names = names;
        w->room = room;
    }
    w->names[2 * w->count] = at;
    w->names[2 * w->count + 1] = n;
    w->count++;
    return 0;
}

/* The object or array at s->p (its bracket) as an embedded document or array, or (an
 * object whose one name starts with "$") as the wrapped value. */
static int write_container(Writer *w, Py_ssize_t type_at) {
    int array = *w->s.p == '[';
    char close = array ? ']' : '}';
    w->s.p++;
    skip_space(&w->s);
    Py_ssize_t start = w->len, base = w->count, index = 0;
    int rc;
    if (put(w, "\0\0\0\0", 4)) return -1;
    while (w->s.p < w->s.end && *w->s.p != close) {
        if (index > 0) {
            if (!literal(&w->s, ",", 1)) return UNSURE;
            skip_space(&w->s);
        }
        Py_ssize_t element = w->len;
        if (put(w, "", 1)) return -1; /* the type, set by write_value */
        Py_ssize_t name_at = w->len, name_len;
        if (array) {
            char digits[24];
            int at = (int)sizeof(digits) - 1;
            digits[at] = 0;
            Py_ssize_t rest = index;
            do {
                digits[--at] = (char)('0' + rest % 10);
                rest /= 10;
            } while (rest > 0);
            name_len = (Py_ssize_t)sizeof(digits) - 1 - at;
            if (put(w, digits + at, name_len + 1)) return -1;
        } else {
            const char *name;
            if (w->s.p >= w->s.end || *w->s.p != '"' || scan_string(&w->s, &name, &name_len))
                return UNSURE;
            if (memchr(name, 0, name_len) != NULL) return UNSURE;
            if (put(w, name, name_len) || put(w, "", 1)) return -1;
            skip_space(&w->s);
            if (!literal(&w->s, ":", 1)) return UNSURE;
            skip_space(&w->s);
            if (name_len > 0 && name[0] == '$') {
                const char *stored = w->out + name_at; /* name may point into s.buf */
                if (index > 0) return UNSURE;
                /* The wrapper replaces the object: its value is the element's own. */
                char copy[16];
                if (name_len >= (Py_ssize_t)sizeof(copy)) return UNSURE;
                memcpy(copy, stored, name_len);
                w->len = start;
                if ((rc = write_wrapper(w, copy, name_len, type_at)) != 0) return rc;
                skip_space(&w->s);
                return literal(&w->s, "}", 1) ? 0 : UNSURE;
            }
            if ((rc = new_name(w, base, name_at, name_len)) != 0) return rc;
            /* pymongo's encoder moves a top-level _id to the front: such text is its. */
            if (w->s.depth == 1 && index > 0 && name_len == 3 &&
                memcmp(w->out + name_at, "_id", 3) == 0)
                return UNSURE;
        }
        if ((rc = write_value(w, element)) != 0) return rc;
        skip_space(&w->s);
        index++;
    }
    if (w->s.p >= w->s.end) return UNSURE;
    w->s.p++;
    w->count = base;
    if (put(w, "", 1)) return -1;
    if (w->len - start > INT32_MAX) return UNSURE;
    put_at(w, start, (int32_t)(w->len - start));
    w->out[type_at] = array ? 0x04 : 0x03;
    return 0;
}

/* The value at s->p; its BSON type set at out[type_at]. 0, UNSURE, or -1 with an error. */
static int write_value(Writer *w, Py_ssize_t type_at) {
    if (w->s.p >= w->s.end) return UNSURE;
    switch (*w->s.p) {
        case '"': {
            const char *bytes;
            Py_ssize_t n;
            if (scan_string(&w->s, &bytes, &n) || n >= INT32_MAX) return UNSURE;
            int32_t size = (int32_t)(n + 1);
            w->out[type_at] = 0x02;
            return put(w, &size, 4) || put(w, bytes, n) || put(w, "", 1) ? -1 : 0;
        }
        case '{':
        case '[': {
            if (++w->s.depth > w->s.max_depth) return UNSURE;
            int rc = write_container(w, type_at);
            w->s.depth--;
            return rc;
        }
        case 't':
            if (!literal(&w->s, "true", 4)) return UNSURE;
            w->out[type_at] = 0x08;
            return put(w, "\1", 1);
        case 'f':
            if (!literal(&w->s, "false", 5)) return UNSURE;
            w->out[type_at] = 0x08;
            return put(w, "", 1);
        case 'n':
            if (!literal(&w->s, "null", 4)) return UNSURE;
            w->out[type_at] = 0x0A;
            return 0;
        default: return UNSURE; /* a bare number, or not JSON */
    }
}

PyObject *document_bson(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "document_bson expects 2 arguments");
        return NULL;
    }
    Writer w = {{0}, NULL, 0, 0, NULL, 0, 0};
    int opened = open_scan(&w.s, args[0], args[1]);
    if (opened < 0) return NULL;
    if (opened > 0) Py_RETURN_NONE;
    PyObject *found = NULL;
    int rc = put(&w, "\x03", 1); /* the type write_value sets: a document's at the top */
    skip_space(&w.s);
    if (rc == 0 && (w.s.p >= w.s.end || *w.s.p != '{')) rc = UNSURE;
    if (rc == 0) rc = write_value(&w, 0);
    skip_space(&w.s);
    if (rc == 0 && (w.out[0] != 0x03 || w.s.p != w.s.end)) rc = UNSURE; /* a wrapper, or more */
    if (rc == 0) found = PyBytes_FromStringAndSize(w.out + 1, w.len - 1);
    else if (rc == UNSURE) found = Py_NewRef(Py_None);
    PyMem_Free(w.s.buf);
    PyMem_Free(w.out);
    PyMem_Free(w.names);
    return found;
}
