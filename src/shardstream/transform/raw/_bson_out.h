/* A small BSON writer over _ejson.h's Out buffer, for the sync's write statements
 * (cluster_sync/_write_statements.c) and update pipelines (cluster_sync/_update_pipeline.c)
 * and the compiled diff applier (transform/update/_apply_diff.c). Every function returns 0,
 * or -1 with MemoryError set; open_doc returns the document's start (or -1). */
#ifndef SHARDSTREAM_BSON_OUT_H
#define SHARDSTREAM_BSON_OUT_H

#include "_ejson.h"
#include "_event_walk.h"

/* Open a document or array: its length is written by close_doc. */
static inline Py_ssize_t open_doc(Out *o) {
    if (grow(o, 4)) return -1;
    o->len += 4;
    return o->len - 4;
}

static inline void put_le32(char *at, int32_t v) {
    for (int i = 0; i < 4; i++) at[i] = (char)((uint32_t)v >> (8 * i));
}

static inline int close_doc(Out *o, Py_ssize_t start) {
    if (put(o, "", 1)) return -1;
    put_le32(o->buf + start, (int32_t)(o->len - start));
    return 0;
}

/* An element's type byte and name (a C string). */
static inline int head(Out *o, int kind, const char *name) {
    char k = (char)kind;
    return put(o, &k, 1) || put(o, name, (Py_ssize_t)strlen(name) + 1) ? -1 : 0;
}

/* Open a document (or array, kind 0x04) element named `as`. */
static inline Py_ssize_t open_element(Out *o, int kind, const char *as) {
    return head(o, kind, as) ? -1 : open_doc(o);
}

static inline int put_text(Out *o, const char *as, const char *s, Py_ssize_t n) {
    char len[4];
    put_le32(len, (int32_t)(n + 1));
    return head(o, 0x02, as) || put(o, len, 4) || put(o, s, n) || put(o, "", 1) ? -1 : 0;
}

static inline int put_cstring(Out *o, const char *as, const char *s) {
    return put_text(o, as, s, (Py_ssize_t)strlen(s));
}

static inline int put_int32(Out *o, const char *as, int32_t v) {
    char bytes[4];
    put_le32(bytes, v);
    return head(o, 0x10, as) || put(o, bytes, 4) ? -1 : 0;
}

static inline int put_null(Out *o, const char *as) { return head(o, 0x0A, as); }

/* The value of type kind at raw[value:after] as the element named `as`. */
static inline int put_value(Out *o, const char *as, const unsigned char *raw, int kind,
                            Py_ssize_t value, Py_ssize_t after) {
    return head(o, kind, as) || put(o, (const char *)raw + value, after - value) ? -1 : 0;
}

#endif
