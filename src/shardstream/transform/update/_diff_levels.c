/* A $v: 2 update's diff levels read and checked (see _diff_levels.h): each level's sections
 * in the order the reference applies them, each field once, array diffs' indexes rising
 * below their l; the whole diff checked before _apply_diff.c writes a byte. */
#include "_diff_levels.h"

/* The section (DEL, UPD, INS; SUB for s<field>) a document level's name opens, or -1. */
static int section_of(const char *name) {
    if (name[0] == 's') return SUB;
    if (name[1] != 0) return -1; /* "dx" reads as "d" in the reference: left to it */
    return name[0] == 'd' ? DEL : name[0] == 'u' ? UPD : name[0] == 'i' ? INS : -1;
}

int read_level(const unsigned char *d, Py_ssize_t start, Entry *entries, int *count, int depth) {
    Py_ssize_t end = doc_end(d, start), pos = start + 4;
    int previous = -1, n = 0;
    if (pos >= end) return FALLBACK;
    while (pos < end) {
        int kind;
        const unsigned char *name;
        Py_ssize_t value, after;
        if (element_at(d, pos, end, &kind, &name, &value, &after) || kind != 0x03) return FALLBACK;
        pos = after;
        int section = section_of((const char *)name);
        if (section < 0 || (section != SUB && section <= previous)) return FALLBACK;
        previous = section;
        if (section == SUB) {
            if (n == MAX_LEVEL_ENTRIES || (depth != NO_CHECK && check_diff(d, value, depth + 1))) {
                return FALLBACK;
            }
            entries[n++] = (Entry){(const char *)name + 1, SUB, kind, value, after, 0};
            continue;
        }
        Py_ssize_t inner_end = doc_end(d, value), inner = value + 4;
        while (inner < inner_end) {
            int k;
            const unsigned char *field;
            Py_ssize_t v, a;
            if (element_at(d, inner, inner_end, &k, &field, &v, &a) || n == MAX_LEVEL_ENTRIES) {
                return FALLBACK;
            }
            entries[n++] = (Entry){(const char *)field, section, k, v, a, 0};
            inner = a;
        }
    }
    for (int i = 0; i < n; i++) { /* each field once in a level (4728000) */
        for (int j = 0; j < i; j++) {
            if (strcmp(entries[i].name, entries[j].name) == 0) return FALLBACK;
        }
    }
    *count = n;
    return 0;
}

/* An array diff: header a: true, optional l (an int32 below MAX_PADDED), then u<i> / s<i>
 * entries with increasing indexes below l. 0, or FALLBACK. */
static int check_array_diff(const unsigned char *d, Py_ssize_t start, int depth) {
    Py_ssize_t end = doc_end(d, start), pos = start + 4;
    int kind;
    const unsigned char *name;
    Py_ssize_t value, after;
    if (element_at(d, pos, end, &kind, &name, &value, &after) || kind != 0x08 || d[value] != 1) {
        return FALLBACK;
    }
    pos = after;
    int64_t limit = MAX_PADDED, previous = -1;
    int first = 1;
    while (pos < end) {
        if (element_at(d, pos, end, &kind, &name, &value, &after)) return FALLBACK;
        pos = after;
        if (first && is_named(name, "l")) {
            first = 0;
            if (kind != 0x10 || i32(d + value) < 0 || i32(d + value) >= MAX_PADDED) return FALLBACK;
            limit = i32(d + value);
            continue;
        }
        first = 0;
        int32_t index = index_after((const char *)name + 1);
        if (index < 0 || index <= previous || index >= limit) return FALLBACK;
        previous = index;
        if (name[0] == 's') {
            if (kind != 0x03 || check_diff(d, value, depth + 1)) return FALLBACK;
        } else if (name[0] != 'u') {
            return FALLBACK;
        }
    }
    return 0;
}

int check_diff(const unsigned char *d, Py_ssize_t start, int depth) {
    if (d[start + 4] == 0 || depth > MAX_DIFF_DEPTH) return FALLBACK; /* empty: 4770500 */
    if (is_array_diff(d, start)) return check_array_diff(d, start, depth);
    Entry entries[MAX_LEVEL_ENTRIES];
    int count;
    return read_level(d, start, entries, &count, depth);
}
