/* What the parts of the _ejson module share: _ejson.c writes Extended JSON from BSON (its
 * scalars in _ejson_scalars.c), _event_fields.c and _event_columns.c read change events' top
 * levels (_event_walk.c) and write their documents with it,
 * _bson_check.c judges an oplog entry's bytes for the fast path. */
#ifndef SHARDSTREAM_EJSON_H
#define SHARDSTREAM_EJSON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define FALLBACK 1 /* not written here: the Python walker takes the whole document */

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} Out;

/* Room for need more bytes in o (0), or -1 with MemoryError set. */
static inline int grow(Out *o, Py_ssize_t need) {
    if (o->len + need <= o->cap) return 0;
    Py_ssize_t cap = o->cap ? o->cap : 1024;
    while (cap < o->len + need) cap *= 2;
    char *b = PyMem_Realloc(o->buf, cap);
    if (b == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->buf = b;
    o->cap = cap;
    return 0;
}

static inline int put(Out *o, const char *s, Py_ssize_t n) {
    if (grow(o, n)) return -1;
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    return 0;
}

#define PUT(o, lit) put((o), (lit), (Py_ssize_t)(sizeof(lit) - 1))

static const char HEX[] = "0123456789abcdef"; /* lower case, as Python writes \\u escapes and ids */

static inline int32_t i32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                     ((uint32_t)p[3] << 24));
}

static inline uint64_t u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* The document at raw[start:] (within len) as Extended JSON appended to o; *next is set past
 * it. 0: written; FALLBACK: the Python walker's case; -1: a Python error is set. */
int put_document(Out *o, const unsigned char *raw, Py_ssize_t len, Py_ssize_t start, int relaxed,
                 int is_array, int top, int depth, Py_ssize_t *next);

PyObject *event_fields(PyObject *self, PyObject *args);

/* _event_columns.c: many events' row fields as Arrow buffers. */
PyObject *event_columns(PyObject *self, PyObject *args);

/* _event_split.c: an event's BSON without some top-level fields, and those fields. */
PyObject *split_fields(PyObject *self, PyObject *args);

/* _bson_check.c: whether an oplog entry's bytes may be copied as they are (see bson_check.py),
 * from Python and from C (the sync's write statements, cluster_sync/_write_statements.c). */
PyObject *valid_entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
int bson_valid(const unsigned char *raw, Py_ssize_t len, int max_nesting);

#endif
