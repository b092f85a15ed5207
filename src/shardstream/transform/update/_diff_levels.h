/* A $v: 2 update's diff levels read and checked on its BSON bytes (_diff_levels.c), for
 * _apply_diff.c's applier: the shapes doc_diff::applyDiff accepts, no Python object. */
#ifndef SHARDSTREAM_DIFF_LEVELS_H
#define SHARDSTREAM_DIFF_LEVELS_H

#include "_event_walk.h"

#define MAX_LEVEL_ENTRIES 64   /* a diff level with more entries goes to the reference */
#define MAX_PADDED 65536       /* an array diff's l or index at or past this: the reference */
#define MAX_DIFF_DEPTH 32      /* deeper diffs too: each level's entries live on the stack */
#define NO_CHECK -1            /* read_level's depth when the diff was checked already */

enum { DEL, UPD, INS, SUB };

typedef struct {
    const char *name; /* the field, a C string in the update's bytes */
    int op, kind;     /* the payload's BSON type */
    Py_ssize_t value, after;
    int written;
} Entry;

/* The end (final NUL) of the document whose length prefix is at raw[start]. */
static inline Py_ssize_t doc_end(const unsigned char *raw, Py_ssize_t start) {
    return start + i32(raw + start) - 1;
}

/* A canonical decimal index below MAX_PADDED after a section letter, or -1. */
static inline int32_t index_after(const char *digits) {
    if (digits[0] == 0 || (digits[0] == '0' && digits[1] != 0)) return -1;
    int32_t v = 0;
    for (int n = 0; digits[n]; n++) {
        if (digits[n] < '0' || digits[n] > '9' || n >= 5) return -1;
        v = v * 10 + (digits[n] - '0');
    }
    return v < MAX_PADDED ? v : -1;
}

/* Whether the sub-diff document at raw[start] is an array diff (its first name is "a"). */
static inline int is_array_diff(const unsigned char *raw, Py_ssize_t start) {
    return raw[start + 4] != 0 && raw[start + 5] == 'a' && raw[start + 6] == 0;
}

/* The entries of the document diff level at d[start], in the update's order: 0, or FALLBACK
 * (a level the reference refuses or this leaves to it). Its sub-diffs are checked too,
 * unless depth is NO_CHECK. */
int read_level(const unsigned char *d, Py_ssize_t start, Entry *entries, int *count, int depth);

/* Any diff level, checked with everything below it (depth: its nesting in the diff): 0, or
 * FALLBACK. */
int check_diff(const unsigned char *d, Py_ssize_t start, int depth);

#endif
