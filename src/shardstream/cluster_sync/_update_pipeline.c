/* An update's $v: 2 diff as the update pipeline diff_to_pipeline.py builds, written in C from
 * the diff's bytes: the same stages, field for field (tests/cluster_sync/
 * test_write_statements.py holds the two to each other). diff_to_pipeline.py's docstring says
 * what each stage does and why; the names below follow its functions.
 *
 * put_update_pipeline returns 0, FALLBACK where the Python walk must build it (a section or
 * an array entry it would refuse or read loosely: "dx", "u01x", an "l" that is not an int32),
 * or -1 with MemoryError set. */
#include "_update_pipeline.h"

/* -- the diff's walk (_document_stages, _array_stages) ----------------------------------------- */

typedef struct {
    int kind;
    const char *name;
    Py_ssize_t value, after;
} Entry;

/* The next entry of the document whose final NUL is at end: 1, 0 at its end, or FALLBACK
 * (negated: -FALLBACK) when not framed. */
static int next_entry(const unsigned char *raw, Py_ssize_t *pos, Py_ssize_t end, Entry *e) {
    if (*pos >= end) return 0;
    const unsigned char *name;
    if (element_at(raw, *pos, end, &e->kind, &name, &e->value, &e->after)) return -FALLBACK;
    e->name = (const char *)name;
    *pos = e->after;
    return 1;
}

/* _kind_of: an array diff starts with "a". */
static const char *diff_kind(const unsigned char *raw, Py_ssize_t value) {
    return raw[value + 4] != 0 && strcmp((const char *)raw + value + 5, "a") == 0 ? "array"
                                                                                  : "object";
}

/* The decimal index a name holds after its letter (as int() reads plain digits), or -1. */
static int32_t index_of(const char *digits) {
    int32_t v = 0;
    int n = 0;
    for (; digits[n]; n++) {
        if (digits[n] < '0' || digits[n] > '9' || n == 9) return -1;
        v = v * 10 + (digits[n] - '0');
    }
    return n ? v : -1;
}

static int document_stages(Pipeline *p, Py_ssize_t diff);

static int subdiff_stages(Pipeline *p, Step step, Py_ssize_t child) {
    if (p->depth == MAX_PATH) return FALLBACK;
    p->path[p->depth++] = step;
    int rc;
    if (strcmp(diff_kind(p->raw, child), "array") != 0) {
        rc = document_stages(p, child);
    } else {
        const unsigned char *raw = p->raw;
        Py_ssize_t pos = child + 4, end = child + i32(raw + child) - 1;
        Entry e;
        while ((rc = next_entry(raw, &pos, end, &e)) == 1) {
            Change c = {0};
            if (strcmp(e.name, "a") == 0) continue;
            if (strcmp(e.name, "l") == 0) {
                int64_t size = e.kind == 0x10 ? i32(raw + e.value)
                               : e.kind == 0x12 ? (int64_t)u64(raw + e.value)
                                                : INT64_MAX;
                if (size < INT32_MIN || size > INT32_MAX) return FALLBACK;
                c = (Change){RESIZE, NULL, (int32_t)size, NULL, 0, 0, 0};
            } else if ((e.name[0] == 'u' || e.name[0] == 's') && index_of(e.name + 1) >= 0) {
                int32_t index = index_of(e.name + 1);
                if (e.name[0] == 'u') {
                    c = (Change){SET_ELEMENT, NULL, index, NULL, e.kind, e.value, e.after};
                } else {
                    if (e.kind != 0x03) return FALLBACK;
                    c = (Change){GUARD_ELEMENT, NULL, index, diff_kind(raw, e.value), 0, 0, 0};
                }
            } else {
                return FALLBACK;
            }
            if (put_stage(p, &c, "array")) return -1;
            if (c.kind == GUARD_ELEMENT) {
                Step below = {1, NULL, c.index};
                if ((rc = subdiff_stages(p, below, e.value))) return rc;
            }
        }
        rc = rc < 0 ? FALLBACK : 0;
    }
    p->depth--;
    return rc;
}

/* d and u sections in their order, then each sub-diff (its guard, then its stages), then the
 * i section's fields moved to the end: three passes over the sections. */
static int document_stages(Pipeline *p, Py_ssize_t diff) {
    const unsigned char *raw = p->raw;
    Py_ssize_t end = diff + i32(raw + diff) - 1;
    for (int pass = 0; pass < 3; pass++) {
        Py_ssize_t pos = diff + 4;
        Entry section;
        int rc;
        while ((rc = next_entry(raw, &pos, end, &section)) == 1) {
            char letter = section.name[0];
            int whole = section.name[1] == 0;
            if (section.kind != 0x03 ||
                !(letter == 's' || (whole && letter != 0 && strchr("dui", letter)))) {
                return FALLBACK;
            }
            if ((letter == 's') != (pass == 1) || (letter == 'i') != (pass == 2)) continue;
            if (letter == 's') {
                Change guard = {GUARD_FIELD, section.name + 1, 0, diff_kind(raw, section.value),
                                0, 0, 0};
                if (put_stage(p, &guard, "object")) return -1;
                Step below = {0, section.name + 1, 0};
                if ((rc = subdiff_stages(p, below, section.value))) return rc;
                continue;
            }
            ChangeKind kind = letter == 'd' ? UNSET : letter == 'u' ? SET : MOVE;
            Py_ssize_t at = section.value + 4, stop = section.after - 1;
            Entry field;
            while ((rc = next_entry(raw, &at, stop, &field)) == 1) {
                Change c = {kind, field.name, 0, NULL, field.kind, field.value, field.after};
                if (put_stage(p, &c, "object")) return -1;
            }
            if (rc < 0) return FALLBACK;
        }
        if (rc < 0) return FALLBACK;
    }
    return 0;
}

int put_update_pipeline(Out *o, const unsigned char *raw, Py_ssize_t diff) {
    Pipeline *p = PyMem_Malloc(sizeof(Pipeline));
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    p->o = o, p->raw = raw, p->depth = 0, p->stages = 0;
    int rc = document_stages(p, diff);
    PyMem_Free(p);
    return rc;
}
