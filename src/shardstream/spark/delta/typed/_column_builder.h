/* A typed column's Arrow buffers built from BSON values (_column_builder.c), for
 * _bson_columns.c: the value rules of its comment, a value at a time, no Python object. */
#ifndef SHARDSTREAM_COLUMN_BUILDER_H
#define SHARDSTREAM_COLUMN_BUILDER_H

#include "_event_walk.h"

enum { K_PYTHON, K_INT32, K_INT64, K_DOUBLE, K_BOOL, K_STRING, K_TIMESTAMP, K_BINARY, K_STRUCT,
       K_LIST, K_COUNT };

#define MISFIT 1    /* a value left to Python: its column is not built here */
#define MALFORMED 2 /* bytes that are no BSON document: nothing is built here */

typedef struct Col {
    int kind, failed;
    Py_ssize_t length, nulls;
    Out valid, data, offsets;
    Py_ssize_t count; /* a struct's fields (the plan's columns at the top), a list's 1 */
    struct Col *children;
    const char **names;
    Py_ssize_t *name_lens;
    Py_ssize_t hint; /* the field the next name most likely is: documents repeat their order */
} Col;

/* One element of a document being read: its type, name and value's bytes. */
typedef struct {
    unsigned char type;
    const char *name;
    Py_ssize_t name_len;
    const unsigned char *value;
    Py_ssize_t size;
} Element;

/* The column's buffers and its children's freed (the Col itself is the caller's). */
void free_col(Col *c);

/* An offset appended to a string, binary or list column: 0, or -1 with OverflowError. */
int put_offset(Col *c, Py_ssize_t end);

/* A null row appended (a struct's children each get one too): 0, or -1 on error. */
int add_null(Col *c);

/* The next element of a document whose elements run from *pos to its final NUL at raw[end]
 * (_event_walk's framing): 1 (*pos past it), 0 at the end, -1 malformed. */
int next_element(const unsigned char *raw, Py_ssize_t end, Py_ssize_t *pos, Element *e);

/* The child of c named by e (-1: none). */
Py_ssize_t find_child(Col *c, const Element *e);

/* e's value appended as a row of c: 0, MISFIT (a value left to Python), MALFORMED, or -1
 * with an error set. */
int add_value(Col *c, const Element *e);

#endif
