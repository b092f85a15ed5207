/* Whether an oplog entry's bytes may be copied into events as they are, in C.
 *
 * valid_entry(raw, max_nesting=200) is True only for one BSON document that pymongo's
 * bson.decode (with the project's OPLOG_CODEC_OPTIONS) decodes, that the reference's encoder
 * writes back byte for byte, and that nests at most max_nesting levels below its top; False
 * means "not sure": the entry takes the reference path, which decodes it and reports what is
 * wrong (or writes what the decode gives). The rules, one by one (lengths, strict UTF-8, bool
 * bytes, binary subtype 2, types that do not come back as themselves, array keys, repeated
 * keys, DBRef order, regex flags, depth), are those of bson_check.py, the pure-Python
 * reference this is held to by tests/transform/raw/test_bson_check.py.
 */
#include "_ejson.h"

/* server: BSONDepth::kDefaultMaxAllowableDepth (bson/bson_depth.h), the nesting validateBSON
 * accepts below a document's top (ValidateBuffer::_pushFrame); oplog/bson_depth.py holds it. */
#define MAX_NESTING 200
#define STACK_KEYS 256
#define MASKED_KEYS 64 /* a document with more keys is checked for repeats when it ends */

typedef struct {
    uint32_t at, len; /* a key's bytes in the entry */
} Key;

typedef struct {
    Key *items, *heap;
    Py_ssize_t count, cap;
} Keys;

typedef struct {
    Py_ssize_t end;   /* where the frame's final NUL is */
    Py_ssize_t first; /* its first key in Keys (documents only) */
    uint64_t seen;    /* one bit per key hash seen in it: repeats are compared only on a hit */
    uint32_t index;   /* the next array index */
    int is_array;
    int dbref; /* "$ref" first: decoded as a DBRef, written back $ref, $id, $db, the rest */
} Frame;

/* Strict UTF-8, as Python's decoder takes it: no overlong forms, surrogates or code points
 * above U+10FFFF. */
static int valid_utf8(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        while (i + 8 <= n) {
            uint64_t block;
            memcpy(&block, s + i, 8);
            if (block & 0x8080808080808080ULL) break;
            i += 8;
        }
        if (i >= n) break;
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c < 0xC2) {
            return 0;
        } else if (c < 0xE0) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c < 0xF0) {
            if (i + 2 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F)) return 0;
            i += 3;
        } else if (c < 0xF5) {
            if (i + 3 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 ||
                (s[i + 3] & 0xC0) != 0x80)
                return 0;
            if ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] > 0x8F)) return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* Whether s[0:n] is all ASCII: the common case, checked inline 8 bytes at a time. */
static inline int ascii_only(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    uint64_t high = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t block;
        memcpy(&block, s + i, 8);
        high |= block;
    }
    for (; i < n; i++) high |= s[i];
    return !(high & 0x8080808080808080ULL);
}

/* Whether the key at..at+len is already among keys[first:count] (a hit of the frame's mask). */
static int repeated_key(const unsigned char *raw, const Keys *keys, Py_ssize_t first,
                        uint32_t at, uint32_t len) {
    for (Py_ssize_t i = first; i < keys->count; i++) {
        const Key *k = keys->items + i;
        if (k->len == len && memcmp(raw + k->at, raw + at, len) == 0) return 1;
    }
    return 0;
}

/* Whether keys[first:count] are all different, by a hash table: for a document with more
 * keys than the mask can tell apart. */
static int unique_keys(const unsigned char *raw, const Keys *keys, Py_ssize_t first) {
    Py_ssize_t m = keys->count - first, size = 64;
    const Key *k = keys->items + first;
    while (size < 2 * m) size *= 2;
    Py_ssize_t *slots = PyMem_Malloc(size * sizeof(Py_ssize_t));
    if (slots == NULL) return 0; /* not sure: the reference path decides */
    for (Py_ssize_t i = 0; i < size; i++) slots[i] = -1;
    int unique = 1;
    for (Py_ssize_t i = 0; i < m && unique; i++) {
        uint32_t hash = 2166136261u; /* FNV-1a */
        for (uint32_t j = 0; j < k[i].len; j++) hash = (hash ^ raw[k[i].at + j]) * 16777619u;
        Py_ssize_t s = hash & (size - 1);
        for (; slots[s] >= 0; s = (s + 1) & (size - 1)) {
            const Key *other = k + slots[s];
            if (other->len == k[i].len && memcmp(raw + other->at, raw + k[i].at, k[i].len) == 0) {
                unique = 0;
                break;
            }
        }
        slots[s] = i;
    }
    PyMem_Free(slots);
    return unique;
}

static int add_key(Keys *keys, uint32_t at, uint32_t len) {
    if (keys->count == keys->cap) {
        Py_ssize_t cap = keys->cap * 2;
        Key *grown = PyMem_Malloc(cap * sizeof(Key));
        if (grown == NULL) return 0;
        memcpy(grown, keys->items, keys->count * sizeof(Key));
        PyMem_Free(keys->heap);
        keys->items = keys->heap = grown;
        keys->cap = cap;
    }
    keys->items[keys->count++] = (Key){at, len};
    return 1;
}

/* Whether name[0:n] is the decimal index (no leading zero) a list is written back with. */
static int is_index(const unsigned char *name, Py_ssize_t n, uint32_t index) {
    if (n < 1 || n > 10 || (name[0] == '0' && n > 1)) return 0;
    uint64_t value = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (name[i] < '0' || name[i] > '9') return 0;
        value = value * 10 + (uint64_t)(name[i] - '0');
    }
    return value == index;
}

/* A regex's flags as bson.encode writes them back: each of "ilmsux" at most once, in order. */
static int canonical_flags(const unsigned char *flags, Py_ssize_t n) {
    static const char ORDER[] = "ilmsux";
    const char *last = ORDER - 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *at = memchr(ORDER, flags[i], 6);
        if (at == NULL || at <= last) return 0;
        last = at;
    }
    return 1;
}

static int check(const unsigned char *raw, Py_ssize_t len, int max_nesting, Keys *keys) {
    if (len < 5 || i32(raw) != len || raw[len - 1] != 0) return 0;
    Frame frames[MAX_NESTING + 1]; /* max_nesting <= MAX_NESTING */
    int top = 0;
    frames[0] = (Frame){len - 1, 0, 0, 0, 0, 0};
    Py_ssize_t pos = 4;
    for (;;) {
        Frame *f = frames + top;
        Py_ssize_t end = f->end;
        if (pos == end) { /* the frame's NUL: it is whole */
            if (!f->is_array) {
                if (keys->count - f->first > MASKED_KEYS && !unique_keys(raw, keys, f->first))
                    return 0;
                if (f->dbref && keys->count - f->first < 2) return 0; /* "$ref" without "$id" */
                keys->count = f->first;
            }
            if (top == 0) return 1;
            top--;
            pos = end + 1;
            continue;
        }
        int kind = raw[pos];
        Py_ssize_t name = pos + 1, n, v = name;
        if (f->is_array) {
            while (v < end && raw[v]) v++;
            if (v == end || !is_index(raw + name, v - name, f->index++)) return 0;
        } else {
            unsigned char high = 0;
            while (v < end && raw[v]) high |= raw[v++];
            if (v == end) return 0;
            Py_ssize_t name_len = v - name;
            if ((high & 0x80) && !valid_utf8(raw + name, name_len)) return 0;
            Py_ssize_t index = keys->count - f->first; /* the key's place in its document */
            if (raw[name] == '$' || f->dbref) {
                if (name_len == 4 && memcmp(raw + name, "$ref", 4) == 0) {
                    if (index != 0 || kind != 0x02) return 0;
                    f->dbref = 1;
                } else if (f->dbref && index == 1) {
                    if (name_len != 3 || memcmp(raw + name, "$id", 3) != 0) return 0;
                } else if (f->dbref && name_len == 3 && memcmp(raw + name, "$db", 3) == 0) {
                    if (index != 2 || kind != 0x02) return 0;
                }
            }
            /* A repeated key: a 64-bit mask of hashes (length, first and last bytes) finds
             * candidates, and only a hit compares names; past MASKED_KEYS, unique_keys. */
            uint32_t hash = (uint32_t)name_len * 0x9E3779B1u;
            if (name_len) hash += ((uint32_t)raw[name] * 0x85EBCA77u) ^ ((uint32_t)raw[v - 1] * 0xC2B2AE3Du);
            uint64_t bit = (uint64_t)1 << (hash >> 26);
            if ((f->seen & bit) && keys->count - f->first <= MASKED_KEYS &&
                repeated_key(raw, keys, f->first, (uint32_t)name, (uint32_t)name_len))
                return 0;
            f->seen |= bit;
            if (!add_key(keys, (uint32_t)name, (uint32_t)name_len)) return 0;
        }
        v++; /* past the name's NUL: the value */
        Py_ssize_t room = end - v, size; /* the value must end before the frame's NUL */
        switch (kind) {
            case 0x01: case 0x09: case 0x11: case 0x12: size = 8; break;
            case 0x10: size = 4; break;
            case 0x07: size = 12; break;
            case 0x13: size = 16; break;
            case 0x0A: case 0x7F: case 0xFF: size = 0; break;
            case 0x08:
                if (room < 1 || raw[v] > 1) return 0;
                size = 1;
                break;
            case 0x02: case 0x0D: /* string, code */
                if (room < 5) return 0;
                n = i32(raw + v);
                if (n < 1 || n > room - 4 || raw[v + 3 + n] != 0) return 0;
                if (!ascii_only(raw + v + 4, n - 1) && !valid_utf8(raw + v + 4, n - 1)) return 0;
                size = 4 + n;
                break;
            case 0x03: case 0x04:
                if (room < 5) return 0;
                n = i32(raw + v);
                if (n < 5 || n > room || raw[v + n - 1] != 0 || top >= max_nesting) return 0;
                frames[++top] = (Frame){v + n - 1, keys->count, 0, 0, kind == 0x04, 0};
                pos = v + 4;
                continue;
            case 0x05:
                if (room < 5) return 0;
                n = i32(raw + v);
                if (n < 0 || n > room - 5) return 0;
                if (raw[v + 4] == 2 && (n < 4 || i32(raw + v + 5) != n - 4)) return 0;
                size = 5 + n;
                break;
            case 0x0B: { /* regex: pattern and flags, two C strings */
                const unsigned char *stop = memchr(raw + v, 0, room);
                if (stop == NULL) return 0;
                Py_ssize_t flags = stop - raw + 1;
                const unsigned char *flags_stop = memchr(raw + flags, 0, end - flags);
                if (flags_stop == NULL) return 0;
                if (!valid_utf8(raw + v, stop - raw - v)) return 0;
                if (!canonical_flags(raw + flags, flags_stop - raw - flags)) return 0;
                size = flags_stop - raw + 1 - v;
                break;
            }
            default: /* undefined, DBPointer, symbol, code with scope, not BSON */
                return 0;
        }
        if (size > room) return 0;
        pos = v + size;
    }
}

int bson_valid(const unsigned char *raw, Py_ssize_t len, int max_nesting) {
    Key stack_keys[STACK_KEYS];
    Keys keys = {stack_keys, NULL, 0, STACK_KEYS};
    int ok = check(raw, len, max_nesting, &keys);
    PyMem_Free(keys.heap);
    return ok;
}

PyObject *valid_entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "valid_entry(raw, max_nesting=200, /)");
        return NULL;
    }
    long max_nesting = MAX_NESTING;
    if (nargs == 2) {
        max_nesting = PyLong_AsLong(args[1]);
        if (max_nesting == -1 && PyErr_Occurred()) return NULL;
        if (max_nesting < 0 || max_nesting > MAX_NESTING) {
            PyErr_SetString(PyExc_ValueError, "max_nesting: expected 0 to 200");
            return NULL;
        }
    }
    PyObject *arg = args[0];
    int ok;
    if (PyBytes_CheckExact(arg)) {
        ok = bson_valid((const unsigned char *)PyBytes_AS_STRING(arg), PyBytes_GET_SIZE(arg),
                        (int)max_nesting);
    } else {
        Py_buffer view;
        if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
        ok = bson_valid(view.buf, view.len, (int)max_nesting);
        PyBuffer_Release(&view);
    }
    return PyBool_FromLong(ok);
}
