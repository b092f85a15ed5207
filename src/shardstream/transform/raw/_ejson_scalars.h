/* The scalar writers of _ejson_scalars.c, for _ejson.c's walk of documents and arrays.
 * Each appends to o and returns 0, FALLBACK (the Python walker's case) or -1 (a Python error
 * set). Called across files, not inlined: dumps of one 9-field document measured 2-3 %
 * slower than with them in _ejson.c, the benchmark corpus's events not (2026-11-29,
 * benchmarks/README.md, "JSON output"). */
#ifndef SHARDSTREAM_EJSON_SCALARS_H
#define SHARDSTREAM_EJSON_SCALARS_H

#include "_ejson.h"

/* A quoted JSON string from n bytes of UTF-8 (strictly decoded, as pymongo does). */
int put_string(Out *o, const unsigned char *s, Py_ssize_t n);
/* A length-prefixed BSON string at raw[pos:] (within end): its text, quoted; *next past it. */
int put_bson_string(Out *o, const unsigned char *raw, Py_ssize_t pos, Py_ssize_t end,
                    Py_ssize_t *next);
int put_double(Out *o, double v, int relaxed);
/* A BSON datetime (ms since the epoch). */
int put_date(Out *o, int64_t ms, int relaxed);
int put_base64(Out *o, const unsigned char *s, Py_ssize_t n);
/* The 12 bytes of an ObjectId at p. */
int put_oid(Out *o, const unsigned char *p);
/* An integer in decimal inside wrapper (NULL: bare). */
int put_integer(Out *o, int64_t v, const char *wrapper);

#endif
