/* Canonical Extended JSON to Python values, in C: the common case of token_json.loads.
 *
 * loads(text, unsure, int64, object_id, date, max_depth) returns what token_json's Python
 * parser returns for text, or `unsure` for anything left to it, which is the reference (and
 * raises the errors): a bare number, a type wrapper other than $numberInt, $numberLong,
 * $numberDouble, $oid and {"$date": {"$numberLong": ...}}, an object with a "$" name beside
 * other names, a lone surrogate, text nested deeper than max_depth, or text that is not
 * JSON. The type wrappers are built as the Python parser builds them: int(s), int64(s),
 * float(s), object_id(s), date(int64(s)); two of them without a call into Python where
 * the result is the same: a date within datetime's years 1..9999 is built here (date()
 * gives the same naive UTC datetime), and an id of 24 hex digits is handed to object_id
 * as its 12 bytes (ObjectId takes those without parsing text). Those two calls were a
 * third of a typical document's reading. tests/resume_token/test_json_read.py checks the
 * two parsers against each other.
 *
 * Why: the lakehouse's sinks decode every document a batch writes from its canonical text
 * (the change log's fullDocument, the mirror's stored rows); json.loads calls the Python
 * hook once per object, most of them one-value type wrappers, ~40 us a document.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>

typedef struct {
    const char *p, *end;
    PyObject *int64, *object_id, *date;
    int depth, max_depth;
    char *buf; /* a string's bytes with its escapes undone */
    Py_ssize_t cap;
} Reader;

static PyObject *read_value(Reader *r);

static void skip_space(Reader *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

/* A hex digit's value; -1: not a hex digit. */
static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int hex4(const char *p, const char *end, unsigned *out) {
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

static int reserve(Reader *r, Py_ssize_t need) {
    if (need <= r->cap) return 0;
    Py_ssize_t cap = r->cap ? r->cap : 256;
    while (cap < need) cap *= 2;
    char *b = PyMem_Realloc(r->buf, cap);
    if (b == NULL) return -1;
    r->buf = b;
    r->cap = cap;
    return 0;
}

/* A JSON string at r->p (its opening quote); NULL: unsure. */
static PyObject *read_string(Reader *r) {
    const char *start = ++r->p, *q = start;
    while (q < r->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20) q++;
    if (q >= r->end || (unsigned char)*q < 0x20) return NULL;
    if (*q == '"') {
        r->p = q + 1;
        return PyUnicode_DecodeUTF8(start, q - start, NULL);
    }
    /* Escapes: every escape is at least as long as the UTF-8 it stands for. */
    const char *close = q;
    while (close < r->end && *close != '"') close += (*close == '\\') ? 2 : 1;
    if (close >= r->end || reserve(r, close - start) < 0) return NULL;
    Py_ssize_t n = q - start;
    memcpy(r->buf, start, n);
    while (q < close) {
        unsigned char c = (unsigned char)*q;
        if (c < 0x20) return NULL;
        if (c != '\\') {
            r->buf[n++] = (char)c;
            q++;
            continue;
        }
        char e = q[1];
        q += 2;
        switch (e) {
            case '"': r->buf[n++] = '"'; continue;
            case '\\': r->buf[n++] = '\\'; continue;
            case '/': r->buf[n++] = '/'; continue;
            case 'b': r->buf[n++] = '\b'; continue;
            case 'f': r->buf[n++] = '\f'; continue;
            case 'n': r->buf[n++] = '\n'; continue;
            case 'r': r->buf[n++] = '\r'; continue;
            case 't': r->buf[n++] = '\t'; continue;
            case 'u': break;
            default: return NULL;
        }
        unsigned cp, low;
        if (hex4(q, close, &cp) < 0) return NULL;
        q += 4;
        if (cp >= 0xdc00 && cp <= 0xdfff) return NULL; /* a lone low surrogate */
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (close - q < 6 || q[0] != '\\' || q[1] != 'u' || hex4(q + 2, close, &low) < 0 ||
                low < 0xdc00 || low > 0xdfff)
                return NULL; /* a lone high surrogate */
            q += 6;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        }
        if (cp < 0x80) {
            r->buf[n++] = (char)cp;
        } else if (cp < 0x800) {
            r->buf[n++] = (char)(0xc0 | (cp >> 6));
            r->buf[n++] = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            r->buf[n++] = (char)(0xe0 | (cp >> 12));
            r->buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            r->buf[n++] = (char)(0x80 | (cp & 0x3f));
        } else {
            r->buf[n++] = (char)(0xf0 | (cp >> 18));
            r->buf[n++] = (char)(0x80 | ((cp >> 12) & 0x3f));
            r->buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            r->buf[n++] = (char)(0x80 | (cp & 0x3f));
        }
    }
    r->p = close + 1;
    return PyUnicode_DecodeUTF8(r->buf, n, NULL);
}

/* 0001-01-01T00:00:00.000 and 9999-12-31T23:59:59.999 in milliseconds since the epoch:
 * the dates a datetime holds. */
#define FIRST_DATE_MS (-62135596800000LL)
#define LAST_DATE_MS 253402300799999LL
#define DAY_MS 86400000LL

/* The naive UTC datetime `millis` after the epoch (within FIRST..LAST_DATE_MS), as
 * epoch + timedelta(milliseconds=millis) gives it; the civil date from the day count by
 * H. Hinnant's days-to-civil algorithm (proleptic Gregorian, as datetime's). */
static PyObject *naive_date(long long millis) {
    long long days = millis / DAY_MS, in_day = millis % DAY_MS;
    if (in_day < 0) {
        in_day += DAY_MS;
        days -= 1;
    }
    long long z = days + 719468;
    long long era = (z >= 0 ? z : z - 146096) / 146097;
    long long doe = z - era * 146097;
    long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    long long mp = (5 * doy + 2) / 153;
    int day = (int)(doy - (153 * mp + 2) / 5 + 1);
    int month = (int)(mp < 10 ? mp + 3 : mp - 9);
    int year = (int)(yoe + era * 400 + (month <= 2));
    int ms = (int)(in_day % 1000);
    long long seconds = in_day / 1000;
    return PyDateTimeAPI->DateTime_FromDateAndTime(
        year, month, day, (int)(seconds / 3600), (int)(seconds / 60 % 60), (int)(seconds % 60),
        ms * 1000, Py_None, PyDateTimeAPI->DateTimeType);
}

/* object_id(the 12 bytes of `hex`) when it is 24 hex digits; NULL without an error set:
 * it is not (object_id then gets the text, and says what is wrong with it). */
static PyObject *object_id_of_hex(Reader *r, PyObject *hex) {
    Py_ssize_t size;
    const char *digits = PyUnicode_AsUTF8AndSize(hex, &size);
    if (digits == NULL || size != 24) {
        PyErr_Clear();
        return NULL;
    }
    char raw[12];
    for (int i = 0; i < 12; i++) {
        int high = hex_digit(digits[2 * i]), low = hex_digit(digits[2 * i + 1]);
        if (high < 0 || low < 0) return NULL;
        raw[i] = (char)(high << 4 | low);
    }
    PyObject *bytes = PyBytes_FromStringAndSize(raw, 12);
    if (bytes == NULL) return NULL;
    PyObject *found = PyObject_CallOneArg(r->object_id, bytes);
    Py_DECREF(bytes);
    return found;
}

/* The value of a one-name object whose name starts with "$", as the Python hook builds it. */
static PyObject *type_wrapper(Reader *r, PyObject *name, PyObject *value) {
    if (PyUnicode_CheckExact(value)) {
        if (PyUnicode_CompareWithASCIIString(name, "$numberInt") == 0)
            return PyLong_FromUnicodeObject(value, 10);
        if (PyUnicode_CompareWithASCIIString(name, "$numberLong") == 0)
            return PyObject_CallOneArg(r->int64, value);
        if (PyUnicode_CompareWithASCIIString(name, "$numberDouble") == 0)
            return PyFloat_FromString(value);
        if (PyUnicode_CompareWithASCIIString(name, "$oid") == 0) {
            PyObject *found = object_id_of_hex(r, value);
            if (found != NULL || PyErr_Occurred()) return found;
            return PyObject_CallOneArg(r->object_id, value);
        }
        return NULL;
    }
    if (Py_IS_TYPE(value, (PyTypeObject *)r->int64) &&
        PyUnicode_CompareWithASCIIString(name, "$date") == 0) {
        long long millis = PyLong_AsLongLong(value);
        if (millis == -1 && PyErr_Occurred()) return NULL;
        if (millis >= FIRST_DATE_MS && millis <= LAST_DATE_MS) return naive_date(millis);
        return PyObject_CallOneArg(r->date, value);
    }
    return NULL;
}

static PyObject *read_object(Reader *r) {
    r->p++;
    skip_space(r);
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    Py_ssize_t pairs = 0;
    int dollar = 0;
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        return d;
    }
    for (;;) {
        if (r->p >= r->end || *r->p != '"') goto unsure;
        PyObject *key = read_string(r);
        if (key == NULL) goto unsure;
        dollar |= PyUnicode_GET_LENGTH(key) > 0 && PyUnicode_READ_CHAR(key, 0) == '$';
        skip_space(r);
        if (r->p >= r->end || *r->p != ':') {
            Py_DECREF(key);
            goto unsure;
        }
        r->p++;
        skip_space(r);
        PyObject *value = read_value(r);
        if (value == NULL) {
            Py_DECREF(key);
            goto unsure;
        }
        int failed = PyDict_SetItem(d, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (failed) goto unsure;
        pairs++;
        skip_space(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            skip_space(r);
            continue;
        }
        if (r->p < r->end && *r->p == '}') {
            r->p++;
            break;
        }
        goto unsure;
    }
    if (!dollar) return d;
    if (pairs != 1) goto unsure; /* a "$" name beside others: json_util's hook decides */
    Py_ssize_t at = 0;
    PyObject *name, *value;
    PyDict_Next(d, &at, &name, &value);
    PyObject *wrapped = type_wrapper(r, name, value);
    Py_DECREF(d);
    return wrapped;
unsure:
    Py_DECREF(d);
    return NULL;
}

static PyObject *read_array(Reader *r) {
    r->p++;
    skip_space(r);
    PyObject *list = PyList_New(0);
    if (list == NULL) return NULL;
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        return list;
    }
    for (;;) {
        PyObject *item = read_value(r);
        if (item == NULL) break;
        int failed = PyList_Append(list, item);
        Py_DECREF(item);
        if (failed) break;
        skip_space(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            skip_space(r);
            continue;
        }
        if (r->p < r->end && *r->p == ']') {
            r->p++;
            return list;
        }
        break;
    }
    Py_DECREF(list);
    return NULL;
}

static int literal(Reader *r, const char *word, Py_ssize_t n) {
    if (r->end - r->p < n || memcmp(r->p, word, n) != 0) return 0;
    r->p += n;
    return 1;
}

/* The value at r->p; NULL: unsure (a Python error may be set: the caller clears it). */
static PyObject *read_value(Reader *r) {
    if (r->p >= r->end) return NULL;
    PyObject *found = NULL;
    switch (*r->p) {
        case '"': return read_string(r);
        case '{':
        case '[':
            if (++r->depth > r->max_depth) return NULL;
            found = *r->p == '{' ? read_object(r) : read_array(r);
            r->depth--;
            return found;
        case 't': return literal(r, "true", 4) ? Py_NewRef(Py_True) : NULL;
        case 'f': return literal(r, "false", 5) ? Py_NewRef(Py_False) : NULL;
        case 'n': return literal(r, "null", 4) ? Py_NewRef(Py_None) : NULL;
        default: return NULL; /* a bare number, NaN, Infinity or not JSON */
    }
}

static PyObject *loads(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "loads expects 6 arguments");
        return NULL;
    }
    PyObject *unsure = args[1];
    long max_depth = PyLong_AsLong(args[5]);
    if (max_depth == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t size;
    const char *text = PyUnicode_CheckExact(args[0]) ? PyUnicode_AsUTF8AndSize(args[0], &size) : NULL;
    if (text == NULL) { /* not a str, or one with a lone surrogate */
        PyErr_Clear();
        return Py_NewRef(unsure);
    }
    Reader r = {text, text + size, args[2], args[3], args[4], 0, (int)max_depth, NULL, 0};
    skip_space(&r);
    PyObject *found = read_value(&r);
    skip_space(&r);
    PyMem_Free(r.buf);
    if (found == NULL || r.p != r.end) {
        Py_XDECREF(found);
        PyErr_Clear(); /* the Python parser raises its own error for the same text */
        return Py_NewRef(unsure);
    }
    return found;
}

static PyMethodDef methods[] = {
    {"loads", (PyCFunction)(void (*)(void))loads, METH_FASTCALL,
     "loads(text, unsure, int64, object_id, date, max_depth, /): text's values, or unsure."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_json_read", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__json_read(void) {
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) return NULL;
    return PyModule_Create(&module);
}
