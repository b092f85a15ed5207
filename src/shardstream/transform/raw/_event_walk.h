/* One walk over a change event's top level, shared by the two readers of its row fields:
 * _event_fields.c (a tuple per event, for the Python reader's callers) and _event_columns.c
 * (Arrow buffers for many events at once). Both give the same values for the same bytes. */
#ifndef SHARDSTREAM_EVENT_WALK_H
#define SHARDSTREAM_EVENT_WALK_H

#include "_ejson.h"

enum {
    ID,
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

typedef struct {
    int kind; /* the BSON type byte; 0: absent */
    Py_ssize_t pos, end;
} Span;

/* What the walk found. The scalars are read and checked; strings and documents are left as
 * spans for the reader to write (a text or an Extended JSON string each). */
typedef struct {
    Span f[FIELDS];
    Span ns[2]; /* ns.db, ns.coll (absent unless ns is a document) */
    int has_time, has_wall, has_uuid, has_txn;
    uint32_t time, inc;   /* clusterTime, when a Timestamp */
    int64_t wall_ms;      /* wallTime, when a date in datetime's range (years 1-9999) */
    int64_t txn;          /* txnNumber, when an int32 or int64 */
    char uuid[36];        /* collectionUUID as text, when a subtype-4 binary of 16 bytes */
} EventWalk;

/* Frame raw (one whole document, nothing after it) and read its scalars into w.
 * 0, or FALLBACK: the Python reader's case (see _event_fields.c). */
int walk_event(const unsigned char *raw, Py_ssize_t len, EventWalk *w);

/* The spans of the named fields of the document at raw[start:] (the last one of a repeated
 * name, as a decoded dict keeps). 0, or FALLBACK when the bytes are not a document. */
int find_fields(const unsigned char *raw, Py_ssize_t len, Py_ssize_t start,
                const char *const *names, int count, Span *spans);

/* Where a value of BSON type kind at raw[pos] ends (within end), or -1: malformed or a type
 * not sized here. */
Py_ssize_t value_end(const unsigned char *raw, int kind, Py_ssize_t pos, Py_ssize_t end);

/* The element whose type byte is raw[pos], in a document whose final NUL is raw[end]: its
 * type *kind, its name (a C string), its value's start *value and end *after. 0, or
 * FALLBACK when it is not framed (its name or its value runs past end). */
static inline int element_at(const unsigned char *raw, Py_ssize_t pos, Py_ssize_t end, int *kind,
                             const unsigned char **name, Py_ssize_t *value, Py_ssize_t *after) {
    *kind = raw[pos];
    *name = raw + pos + 1;
    const unsigned char *nul = memchr(*name, 0, end - pos - 1);
    if (nul == NULL) return FALLBACK;
    *value = nul - raw + 1;
    *after = value_end(raw, *kind, *value, end);
    return *after < 0 ? FALLBACK : 0;
}

/* Whether an element's name is wanted; the first byte first: most names differ there, and
 * strcmp costs a call. */
static inline int is_named(const unsigned char *name, const char *wanted) {
    return name[0] == (unsigned char)wanted[0] && strcmp((const char *)name, wanted) == 0;
}

/* Whether a span is absent or null (None in the row). */
static inline int absent(Span s) { return s.kind == 0 || s.kind == 0x0A || s.kind == 0x06; }

/* A string span's UTF-8 bytes: 0 and *text, *n set; FALLBACK when not a string or not strict
 * UTF-8 (what PyUnicode_DecodeUTF8 refuses). The caller has checked it is not absent. */
int string_bytes(const unsigned char *raw, Span s, const char **text, Py_ssize_t *n);

#endif
