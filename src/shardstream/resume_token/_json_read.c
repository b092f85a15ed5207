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
#include "_json_scan.h"
#include <datetime.h>

typedef struct {
    Scan s; /* first: a Reader is read as its Scan */
    PyObject *int64, *object_id, *date;
} Reader;

static PyObject *read_value(Reader *r);

/* A JSON string at r->s.p (its opening quote); NULL: unsure. */
static PyObject *read_string(Reader *r) {
    const char *bytes;
    Py_ssize_t n;
    if (scan_string(&r->s, &bytes, &n) < 0) return NULL;
    return PyUnicode_DecodeUTF8(bytes, n, NULL);
}

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
    r->s.p++;
    skip_space(&r->s);
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    Py_ssize_t pairs = 0;
    int dollar = 0;
    if (r->s.p < r->s.end && *r->s.p == '}') {
        r->s.p++;
        return d;
    }
    for (;;) {
        if (r->s.p >= r->s.end || *r->s.p != '"') goto unsure;
        PyObject *key = read_string(r);
        if (key == NULL) goto unsure;
        dollar |= PyUnicode_GET_LENGTH(key) > 0 && PyUnicode_READ_CHAR(key, 0) == '$';
        skip_space(&r->s);
        if (r->s.p >= r->s.end || *r->s.p != ':') {
            Py_DECREF(key);
            goto unsure;
        }
        r->s.p++;
        skip_space(&r->s);
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
        skip_space(&r->s);
        if (r->s.p < r->s.end && *r->s.p == ',') {
            r->s.p++;
            skip_space(&r->s);
            continue;
        }
        if (r->s.p < r->s.end && *r->s.p == '}') {
            r->s.p++;
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
    r->s.p++;
    skip_space(&r->s);
    PyObject *list = PyList_New(0);
    if (list == NULL) return NULL;
    if (r->s.p < r->s.end && *r->s.p == ']') {
        r->s.p++;
        return list;
    }
    for (;;) {
        PyObject *item = read_value(r);
        if (item == NULL) break;
        int failed = PyList_Append(list, item);
        Py_DECREF(item);
        if (failed) break;
        skip_space(&r->s);
        if (r->s.p < r->s.end && *r->s.p == ',') {
            r->s.p++;
            skip_space(&r->s);
            continue;
        }
        if (r->s.p < r->s.end && *r->s.p == ']') {
            r->s.p++;
            return list;
        }
        break;
    }
    Py_DECREF(list);
    return NULL;
}

/* The value at r->s.p; NULL: unsure (a Python error may be set: the caller clears it). */
static PyObject *read_value(Reader *r) {
    if (r->s.p >= r->s.end) return NULL;
    PyObject *found = NULL;
    switch (*r->s.p) {
        case '"': return read_string(r);
        case '{':
        case '[':
            if (++r->s.depth > r->s.max_depth) return NULL;
            found = *r->s.p == '{' ? read_object(r) : read_array(r);
            r->s.depth--;
            return found;
        case 't': return literal(&r->s, "true", 4) ? Py_NewRef(Py_True) : NULL;
        case 'f': return literal(&r->s, "false", 5) ? Py_NewRef(Py_False) : NULL;
        case 'n': return literal(&r->s, "null", 4) ? Py_NewRef(Py_None) : NULL;
        default: return NULL; /* a bare number, NaN, Infinity or not JSON */
    }
}

static PyObject *loads(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "loads expects 6 arguments");
        return NULL;
    }
    PyObject *unsure = args[1];
    Reader r = {{0}, args[2], args[3], args[4]};
    int opened = open_scan(&r.s, args[0], args[5]);
    if (opened < 0) return NULL;
    if (opened > 0) return Py_NewRef(unsure);
    skip_space(&r.s);
    PyObject *found = read_value(&r);
    skip_space(&r.s);
    PyMem_Free(r.s.buf);
    if (found == NULL || r.s.p != r.s.end) {
        Py_XDECREF(found);
        PyErr_Clear(); /* the Python parser raises its own error for the same text */
        return Py_NewRef(unsure);
    }
    return found;
}

static PyMethodDef methods[] = {
    {"loads", (PyCFunction)(void (*)(void))loads, METH_FASTCALL,
     "loads(text, unsure, int64, object_id, date, max_depth, /): text's values, or unsure."},
    {"document_bson", (PyCFunction)(void (*)(void))document_bson, METH_FASTCALL,
     "document_bson(text, max_depth, /): a document's BSON from its text, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_json_read", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__json_read(void) {
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) return NULL;
    return PyModule_Create(&module);
}
