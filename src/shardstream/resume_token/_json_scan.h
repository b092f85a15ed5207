/* What the two canonical Extended JSON readers share: _json_read.c reads text into Python
 * values, _json_bson.c into BSON. Both leave whatever they are unsure of to the Python
 * parser (token_json), the reference. */
#ifndef SHARDSTREAM_JSON_SCAN_H
#define SHARDSTREAM_JSON_SCAN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    const char *p, *end;
    int depth, max_depth;
    char *buf; /* a string's bytes with its escapes undone */
    Py_ssize_t cap;
} Scan;

static inline void skip_space(Scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

/* A hex digit's value; -1: not a hex digit. */
static inline int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static inline int hex4(const char *p, const char *end, unsigned *out) {
    if (end - p < 4) return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int digit = hex_digit(p[i]);
        if (digit < 0) return -1;
        v = (v << 4) | (unsigned)digit;
    }
    *out = v;
    return 0;
}

static inline int reserve(Scan *s, Py_ssize_t need) {
    if (need <= s->cap) return 0;
    Py_ssize_t cap = s->cap ? s->cap : 256;
    while (cap < need) cap *= 2;
    char *b = PyMem_Realloc(s->buf, cap);
    if (b == NULL) return -1;
    s->buf = b;
    s->cap = cap;
    return 0;
}

static inline int literal(Scan *s, const char *word, Py_ssize_t n) {
    if (s->end - s->p < n || memcmp(s->p, word, n) != 0) return 0;
    s->p += n;
    return 1;
}

/* The JSON string at s->p (its opening quote), its escapes undone: *out and *n are its UTF-8
 * (the text's own bytes, or s->buf's); -1: unsure (a control character, a bad escape, a
 * lone surrogate, no closing quote). The text is a Python str's UTF-8, so valid UTF-8. */
static inline int scan_string(Scan *s, const char **out, Py_ssize_t *n) {
    const char *start = ++s->p, *q = start;
    while (q < s->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20) q++;
    if (q >= s->end || (unsigned char)*q < 0x20) return -1;
    if (*q == '"') {
        s->p = q + 1;
        *out = start;
        *n = q - start;
        return 0;
    }
    /* Escapes: every escape is at least as long as the UTF-8 it stands for. */
    const char *close = q;
    while (close < s->end && *close != '"') close += (*close == '\\') ? 2 : 1;
    if (close >= s->end || reserve(s, close - start) < 0) return -1;
    Py_ssize_t k = q - start;
    char *b = s->buf;
    memcpy(b, start, k);
    while (q < close) {
        unsigned char c = (unsigned char)*q;
        if (c < 0x20) return -1;
        if (c != '\\') {
            b[k++] = (char)c;
            q++;
            continue;
        }
        char e = q[1];
        q += 2;
        switch (e) {
            case '"': b[k++] = '"'; continue;
            case '\\': b[k++] = '\\'; continue;
            case '/': b[k++] = '/'; continue;
            case 'b': b[k++] = '\b'; continue;
            case 'f': b[k++] = '\f'; continue;
            case 'n': b[k++] = '\n'; continue;
            case 'r': b[k++] = '\r'; continue;
            case 't': b[k++] = '\t'; continue;
            case 'u': break;
            default: return -1;
        }
        unsigned cp, low;
        if (hex4(q, close, &cp) < 0) return -1;
        q += 4;
        if (cp >= 0xdc00 && cp <= 0xdfff) return -1; /* a lone low surrogate */
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (close - q < 6 || q[0] != '\\' || q[1] != 'u' || hex4(q + 2, close, &low) < 0 ||
                low < 0xdc00 || low > 0xdfff)
                return -1; /* a lone high surrogate */
            q += 6;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        }
        if (cp < 0x80) {
            b[k++] = (char)cp;
        } else if (cp < 0x800) {
            b[k++] = (char)(0xc0 | (cp >> 6));
            b[k++] = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            b[k++] = (char)(0xe0 | (cp >> 12));
            b[k++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            b[k++] = (char)(0x80 | (cp & 0x3f));
        } else {
            b[k++] = (char)(0xf0 | (cp >> 18));
            b[k++] = (char)(0x80 | ((cp >> 12) & 0x3f));
            b[k++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            b[k++] = (char)(0x80 | (cp & 0x3f));
        }
    }
    s->p = close + 1;
    *out = b;
    *n = k;
    return 0;
}

/* s set to read `text` nested at most `max_depth` deep: 0; 1 when text is not a str, or one
 * with a lone surrogate (the reader's "unsure", no error set); -1 with an error set. */
static inline int open_scan(Scan *s, PyObject *text, PyObject *max_depth) {
    long depth = PyLong_AsLong(max_depth);
    if (depth == -1 && PyErr_Occurred()) return -1;
    Py_ssize_t size;
    const char *utf8 = PyUnicode_CheckExact(text) ? PyUnicode_AsUTF8AndSize(text, &size) : NULL;
    if (utf8 == NULL) {
        PyErr_Clear();
        return 1;
    }
    *s = (Scan){utf8, utf8 + size, 0, (int)depth, NULL, 0};
    return 0;
}

/* 0001-01-01T00:00:00.000 and 9999-12-31T23:59:59.999 in milliseconds since the epoch:
 * the dates a datetime holds. */
#define FIRST_DATE_MS (-62135596800000LL)
#define LAST_DATE_MS 253402300799999LL

/* _json_bson.c: a document's canonical Extended JSON to its BSON (or None: unsure). */
PyObject *document_bson(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#endif
