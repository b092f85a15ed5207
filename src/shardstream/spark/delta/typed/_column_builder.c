/* A typed column's Arrow buffers built from BSON values (see _column_builder.h and the
 * rules in _bson_columns.c's comment). */
#include "_column_builder.h"

/* datetime's years 1..9999 in ms since the epoch: outside them loads gives DatetimeMS. */
#define MIN_DATE_MS (-62135596800000LL)
#define MAX_DATE_MS (253402300799999LL)

void free_col(Col *c) {
    PyMem_Free(c->valid.buf);
    PyMem_Free(c->data.buf);
    PyMem_Free(c->offsets.buf);
    for (Py_ssize_t i = 0; c->children != NULL && i < c->count; i++) free_col(&c->children[i]);
    PyMem_Free(c->children);
    PyMem_Free(c->names);
    PyMem_Free(c->name_lens);
}

/* Bit `bit` of the bitmap o set to on (the bitmap grows a zeroed byte at a time). */
static int set_bit(Out *o, Py_ssize_t bit, int on) {
    if ((bit >> 3) >= o->len && put(o, "", 1)) return -1;
    if (on) o->buf[bit >> 3] |= (char)(1 << (bit & 7));
    return 0;
}

int put_offset(Col *c, Py_ssize_t end) {
    if (end > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "bson_columns: a column passed 2 GiB");
        return -1;
    }
    int32_t v = (int32_t)end;
    return put(&c->offsets, (const char *)&v, 4); /* little-endian, as Arrow's */
}

static int end_row(Col *c, int valid) {
    if (set_bit(&c->valid, c->length, valid)) return -1;
    if (!valid) c->nulls++;
    c->length++;
    return 0;
}

int add_null(Col *c) {
    static const char zeros[8] = {0};
    int rc = 0;
    switch (c->kind) {
    case K_INT32: rc = put(&c->data, zeros, 4); break;
    case K_INT64: case K_DOUBLE: case K_TIMESTAMP: rc = put(&c->data, zeros, 8); break;
    case K_BOOL: rc = set_bit(&c->data, c->length, 0); break;
    case K_STRING: case K_BINARY: rc = put_offset(c, c->data.len); break;
    case K_LIST: rc = put_offset(c, c->children[0].length); break;
    case K_STRUCT:
        for (Py_ssize_t i = 0; i < c->count && rc == 0; i++) rc = add_null(&c->children[i]);
        break;
    }
    return rc ? rc : end_row(c, 0);
}

int next_element(const unsigned char *raw, Py_ssize_t end, Py_ssize_t *pos, Element *e) {
    if (*pos >= end) return *pos == end && raw[end] == 0 ? 0 : -1;
    int kind;
    const unsigned char *name;
    Py_ssize_t value, after;
    if (raw[*pos] == 0 || element_at(raw, *pos, end, &kind, &name, &value, &after)) return -1;
    e->type = (unsigned char)kind;
    e->name = (const char *)name;
    e->name_len = value - 1 - (*pos + 1);
    e->value = raw + value;
    e->size = after - value;
    *pos = after;
    return 1;
}

Py_ssize_t find_child(Col *c, const Element *e) {
    for (Py_ssize_t k = 0; k < c->count; k++) {
        Py_ssize_t i = (c->hint + k) % c->count;
        if (c->name_lens[i] == e->name_len && memcmp(c->names[i], e->name, (size_t)e->name_len) == 0) {
            c->hint = i + 1 == c->count ? 0 : i + 1;
            return i;
        }
    }
    return -1;
}

static int add_struct(Col *c, const Element *e) {
    Element f;
    Py_ssize_t pos = 4;
    int rc;
    while ((rc = next_element(e->value, e->size - 1, &pos, &f)) == 1) {
        if (f.name_len > 0 && f.name[0] == '$') return MISFIT;
        Py_ssize_t i = find_child(c, &f);
        if (i < 0 || c->children[i].length > c->length) return MISFIT; /* unknown, or twice */
        if ((rc = add_value(&c->children[i], &f)) != 0) return rc;
    }
    if (rc < 0) return MALFORMED;
    for (Py_ssize_t i = 0; i < c->count; i++) {
        if (c->children[i].length == c->length && (rc = add_null(&c->children[i])) != 0) return rc;
    }
    return 0;
}

static int add_list(Col *c, const Element *e) {
    Element f;
    Py_ssize_t pos = 4;
    int rc;
    while ((rc = next_element(e->value, e->size - 1, &pos, &f)) == 1) {
        if ((rc = add_value(&c->children[0], &f)) != 0) return rc;
    }
    return rc < 0 ? MALFORMED : put_offset(c, c->children[0].length);
}

static int put_int64(Col *c, int64_t v) { return put(&c->data, (const char *)&v, 8); }

static int put_double(Col *c, double v) { return put(&c->data, (const char *)&v, 8); }

int add_value(Col *c, const Element *e) {
    const unsigned char *p = e->value;
    unsigned char t = e->type;
    int rc;
    if (t == 0x0A) return add_null(c);
    switch (c->kind * 256 + t) {
    case K_INT32 * 256 + 0x10: rc = put(&c->data, (const char *)p, 4); break;
    case K_INT64 * 256 + 0x10: rc = put_int64(c, i32(p)); break;
    case K_INT64 * 256 + 0x12: rc = put(&c->data, (const char *)p, 8); break;
    case K_DOUBLE * 256 + 0x01: rc = put(&c->data, (const char *)p, 8); break;
    case K_DOUBLE * 256 + 0x10: rc = put_double(c, (double)i32(p)); break;
    case K_DOUBLE * 256 + 0x12: rc = put_double(c, (double)(int64_t)u64(p)); break;
    case K_BOOL * 256 + 0x08:
        if (p[0] > 1) return MISFIT;
        rc = set_bit(&c->data, c->length, p[0]);
        break;
    case K_STRING * 256 + 0x02:
        rc = put(&c->data, (const char *)p + 4, e->size - 5);
        if (rc == 0) rc = put_offset(c, c->data.len);
        break;
    case K_STRING * 256 + 0x07: {
        char hex[24];
        for (int i = 0; i < 12; i++) {
            hex[2 * i] = HEX[p[i] >> 4];
            hex[2 * i + 1] = HEX[p[i] & 15];
        }
        rc = put(&c->data, hex, 24);
        if (rc == 0) rc = put_offset(c, c->data.len);
        break;
    }
    case K_TIMESTAMP * 256 + 0x09: {
        int64_t ms = (int64_t)u64(p);
        if (ms < MIN_DATE_MS || ms > MAX_DATE_MS) return MISFIT;
        rc = put_int64(c, ms * 1000);
        break;
    }
    case K_BINARY * 256 + 0x05:
        if (p[4] != 0) return MISFIT; /* another subtype: a UUID is text, the rest Python's */
        rc = put(&c->data, (const char *)p + 5, e->size - 5);
        if (rc == 0) rc = put_offset(c, c->data.len);
        break;
    case K_STRUCT * 256 + 0x03: rc = add_struct(c, e); break;
    case K_LIST * 256 + 0x04: rc = add_list(c, e); break;
    default: return MISFIT;
    }
    return rc ? rc : end_row(c, 1);
}
