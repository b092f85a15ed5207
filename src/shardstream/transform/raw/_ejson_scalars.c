/* Extended JSON of BSON's scalar values, as json_util writes them (the rules of the Python
 * walker, extended_json.py): strings escaped as json.dumps(ensure_ascii=True) does, doubles,
 * dates, binary data, ObjectIds and integers. _ejson.c walks documents and arrays with them.
 */
#include "_ejson_scalars.h"

/* One code point as json.dumps(ensure_ascii=True) escapes it. */
static int put_char(Out *o, Py_UCS4 c) {
    char esc[12];
    if (c >= 0x20 && c <= 0x7e && c != '\\' && c != '"') {
        char ch = (char)c;
        return put(o, &ch, 1);
    }
    switch (c) {
        case '\\': return PUT(o, "\\\\");
        case '"': return PUT(o, "\\\"");
        case '\b': return PUT(o, "\\b");
        case '\f': return PUT(o, "\\f");
        case '\n': return PUT(o, "\\n");
        case '\r': return PUT(o, "\\r");
        case '\t': return PUT(o, "\\t");
    }
    if (c >= 0x10000) { /* a surrogate pair, as Python's json writes it */
        Py_UCS4 v = c - 0x10000;
        Py_UCS4 hi = 0xd800 | ((v >> 10) & 0x3ff), lo = 0xdc00 | (v & 0x3ff);
        esc[0] = '\\', esc[1] = 'u', esc[2] = HEX[(hi >> 12) & 15], esc[3] = HEX[(hi >> 8) & 15];
        esc[4] = HEX[(hi >> 4) & 15], esc[5] = HEX[hi & 15];
        esc[6] = '\\', esc[7] = 'u', esc[8] = HEX[(lo >> 12) & 15], esc[9] = HEX[(lo >> 8) & 15];
        esc[10] = HEX[(lo >> 4) & 15], esc[11] = HEX[lo & 15];
        return put(o, esc, 12);
    }
    esc[0] = '\\', esc[1] = 'u', esc[2] = HEX[(c >> 12) & 15], esc[3] = HEX[(c >> 8) & 15];
    esc[4] = HEX[(c >> 4) & 15], esc[5] = HEX[c & 15];
    return put(o, esc, 6);
}

/* A quoted JSON string from n bytes of UTF-8 (strictly decoded, as pymongo does). */
int put_string(Out *o, const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i;
    int ascii = 1;
    for (i = 0; i < n; i++) {
        if (s[i] >= 0x80) {
            ascii = 0;
            break;
        }
    }
    if (PUT(o, "\"")) return -1;
    if (ascii) {
        Py_ssize_t run = 0; /* copy runs that need no escape in one go */
        for (i = 0; i < n; i++) {
            unsigned char c = s[i];
            if (c >= 0x20 && c <= 0x7e && c != '\\' && c != '"') continue;
            if (put(o, (const char *)s + run, i - run) || put_char(o, c)) return -1;
            run = i + 1;
        }
        if (put(o, (const char *)s + run, n - run)) return -1;
    } else {
        PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, "strict");
        if (text == NULL) {
            PyErr_Clear();
            return FALLBACK;
        }
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        Py_ssize_t length = PyUnicode_GET_LENGTH(text);
        for (i = 0; i < length; i++) {
            if (put_char(o, PyUnicode_READ(kind, data, i))) {
                Py_DECREF(text);
                return -1;
            }
        }
        Py_DECREF(text);
    }
    return PUT(o, "\"");
}

/* A length-prefixed BSON string at p (within end): its text, quoted. */
int put_bson_string(Out *o, const unsigned char *raw, Py_ssize_t pos, Py_ssize_t end,
                    Py_ssize_t *next) {
    if (pos + 4 > end) return FALLBACK;
    int32_t n = i32(raw + pos);
    if (n < 1 || pos + 4 + n > end || raw[pos + 3 + n] != 0) return FALLBACK;
    *next = pos + 4 + n;
    return put_string(o, raw + pos + 4, n - 1);
}

int put_double(Out *o, double v, int relaxed) {
    if (v != v) return PUT(o, "{\"$numberDouble\": \"NaN\"}");
    if (v == Py_HUGE_VAL) return PUT(o, "{\"$numberDouble\": \"Infinity\"}");
    if (v == -Py_HUGE_VAL) return PUT(o, "{\"$numberDouble\": \"-Infinity\"}");
    char *repr = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (repr == NULL) return -1;
    int rc = relaxed ? put(o, repr, (Py_ssize_t)strlen(repr))
                     : (PUT(o, "{\"$numberDouble\": \"") || put(o, repr, (Py_ssize_t)strlen(repr)) ||
                        PUT(o, "\"}"));
    PyMem_Free(repr);
    return rc ? -1 : 0;
}

/* Days since 1970-01-01 to a civil date (H. Hinnant's algorithm), for days >= 0. */
static void civil(int64_t days, int64_t *y, int *m, int *d) {
    days += 719468;
    int64_t era = days / 146097;
    int64_t doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

int put_date(Out *o, int64_t ms, int relaxed) {
    char text[64];
    int n;
    if (relaxed && ms >= 0 && ms <= 253402300799999LL) {
        int64_t secs = ms / 1000, y;
        int frac = (int)(ms % 1000), m, d;
        civil(secs / 86400, &y, &m, &d);
        int rest = (int)(secs % 86400);
        n = snprintf(text, sizeof text, "{\"$date\": \"%04lld-%02d-%02dT%02d:%02d:%02d", (long long)y,
                     m, d, rest / 3600, rest / 60 % 60, rest % 60);
        if (frac) n += snprintf(text + n, sizeof text - n, ".%03d", frac);
        n += snprintf(text + n, sizeof text - n, "Z\"}");
    } else {
        n = snprintf(text, sizeof text, "{\"$date\": {\"$numberLong\": \"%lld\"}}", (long long)ms);
    }
    return put(o, text, n);
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int put_base64(Out *o, const unsigned char *s, Py_ssize_t n) {
    if (grow(o, (n + 2) / 3 * 4)) return -1;
    char *w = o->buf + o->len;
    Py_ssize_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
        *w++ = B64[v >> 18], *w++ = B64[(v >> 12) & 63], *w++ = B64[(v >> 6) & 63], *w++ = B64[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n) v |= (uint32_t)s[i + 1] << 8;
        *w++ = B64[v >> 18], *w++ = B64[(v >> 12) & 63];
        *w++ = (i + 1 < n) ? B64[(v >> 6) & 63] : '=';
        *w++ = '=';
    }
    o->len = w - o->buf;
    return 0;
}

int put_oid(Out *o, const unsigned char *p) {
    char text[36] = "{\"$oid\": \"";
    for (int i = 0; i < 12; i++) text[10 + 2 * i] = HEX[p[i] >> 4], text[11 + 2 * i] = HEX[p[i] & 15];
    text[34] = '"', text[35] = '}';
    return put(o, text, 36);
}


/* An integer in decimal, as Python writes it; inside wrapper (canonical: `{"$numberInt": "`
 * and the closing `"}`) unless wrapper is NULL. (snprintf took a tenth of a row's time.) */
int put_integer(Out *o, int64_t v, const char *wrapper) {
    char text[48], digits[20];
    int n = 0, d = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (wrapper != NULL) {
        size_t w = strlen(wrapper);
        memcpy(text, wrapper, w);
        n = (int)w;
    }
    if (v < 0) text[n++] = '-';
    do {
        digits[d++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (d) text[n++] = digits[--d];
    if (wrapper != NULL) text[n++] = '"', text[n++] = '}';
    return put(o, text, n);
}
