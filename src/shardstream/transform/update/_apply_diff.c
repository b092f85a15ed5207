/* doc_diff::applyDiff on BSON bytes: apply_update.py's result for a $v: 2 update, written as
 * bson.encode writes that result, with no Python object per value.
 *
 * apply_diff(document, update) returns the bytes, or None where apply_update.py must decide:
 * anything but a $v: 2 delta whose every level is well formed ("b" sections, replacements,
 * $v: 1, a malformed diff: the reference raises the server's error), bytes bson_check does
 * not vouch for (a value that would not come back as itself through decode and encode), an
 * update naming the top-level _id (bson.encode moves it first), or an array padded past
 * MAX_PADDED. The whole diff is checked before anything is applied, more strictly than the
 * reference (which reads a level only when it reaches it): a stricter check only sends more
 * updates to the reference (the check is _diff_levels.c's).
 * tests/transform/test_apply_update_bson.py holds the two to each other.
 */
#include "_bson_out.h"
#include "_diff_levels.h"

#define MAX_NESTING 200 /* as bson_check.py */

typedef struct {
    const unsigned char *pre, *diff;
} Inputs;

static int apply_document(Out *o, const Inputs *in, Py_ssize_t pre, Py_ssize_t diff);
static int apply_array(Out *o, const Inputs *in, Py_ssize_t pre, Py_ssize_t diff);

/* A sub-diff applied to the value of kind at pre[value], as the element named `as`: its
 * type's applier, or null when the value is of another type. */
static int apply_subdiff(Out *o, const Inputs *in, const char *as, int kind, Py_ssize_t value,
                         Py_ssize_t diff) {
    int array = is_array_diff(in->diff, diff);
    if (kind != (array ? 0x04 : 0x03)) return put_null(o, as);
    Py_ssize_t at = open_element(o, kind, as);
    if (at < 0) return -1;
    int done = array ? apply_array(o, in, value, diff) : apply_document(o, in, value, diff);
    return done ? done : close_doc(o, at);
}

static int apply_document(Out *o, const Inputs *in, Py_ssize_t pre, Py_ssize_t diff) {
    Entry entries[MAX_LEVEL_ENTRIES];
    int count;
    if (read_level(in->diff, diff, entries, &count, NO_CHECK)) return FALLBACK;
    Py_ssize_t end = doc_end(in->pre, pre), pos = pre + 4;
    while (pos < end) {
        int kind;
        const unsigned char *name;
        Py_ssize_t value, after;
        if (element_at(in->pre, pos, end, &kind, &name, &value, &after)) return FALLBACK;
        pos = after;
        Entry *e = NULL;
        for (int i = 0; i < count && e == NULL; i++) {
            if (is_named(name, entries[i].name)) e = &entries[i];
        }
        int done = 0;
        if (e == NULL) {
            done = put_value(o, (const char *)name, in->pre, kind, value, after);
        } else if (e->op == UPD) {
            e->written = 1;
            done = put_value(o, e->name, in->diff, e->kind, e->value, e->after);
        } else if (e->op == SUB) {
            done = apply_subdiff(o, in, e->name, kind, value, e->value);
        } /* DEL drops the field; INS drops it here and appends it below */
        if (done) return done;
    }
    for (int op = UPD; op <= INS; op++) { /* u fields the document lacked, then i fields */
        for (int i = 0; i < count; i++) {
            Entry *e = &entries[i];
            if (e->op == op && !e->written &&
                put_value(o, e->name, in->diff, e->kind, e->value, e->after)) {
                return -1;
            }
        }
    }
    return 0;
}

/* The next array diff entry at in->diff[*pos] (within end) as its index, op and payload;
 * index -1 when none is left. */
static void next_entry(const Inputs *in, Py_ssize_t *pos, Py_ssize_t end, int32_t *index,
                       Entry *e) {
    *index = -1;
    while (*pos < end) {
        const unsigned char *name;
        element_at(in->diff, *pos, end, &e->kind, &name, &e->value, &e->after); /* checked */
        *pos = e->after;
        if (!is_named(name, "l")) {
            *index = index_after((const char *)name + 1);
            e->op = name[0] == 'u' ? UPD : SUB;
            return;
        }
    }
}

static int apply_array(Out *o, const Inputs *in, Py_ssize_t pre, Py_ssize_t diff) {
    Py_ssize_t diff_end = doc_end(in->diff, diff), entry_pos = diff + 4;
    int kind;
    const unsigned char *name;
    Py_ssize_t value, after;
    element_at(in->diff, entry_pos, diff_end, &kind, &name, &value, &after); /* a: true */
    entry_pos = after;
    int64_t size = -1;
    if (entry_pos < diff_end) {
        element_at(in->diff, entry_pos, diff_end, &kind, &name, &value, &after);
        if (is_named(name, "l")) size = i32(in->diff + value);
    }
    Entry e;
    int32_t index;
    next_entry(in, &entry_pos, diff_end, &index, &e);
    Py_ssize_t end = doc_end(in->pre, pre), pos = pre + 4;
    char key[16];
    int64_t written = 0;
    while (pos < end && (size < 0 || written < size)) {
        if (element_at(in->pre, pos, end, &kind, &name, &value, &after)) return FALLBACK;
        pos = after;
        snprintf(key, sizeof key, "%lld", (long long)written);
        int done;
        if (index == written) {
            done = e.op == UPD ? put_value(o, key, in->diff, e.kind, e.value, e.after)
                               : apply_subdiff(o, in, key, kind, value, e.value);
            next_entry(in, &entry_pos, diff_end, &index, &e);
        } else {
            done = put_value(o, key, in->pre, kind, value, after);
        }
        if (done) return done;
        written++;
    }
    /* Past the pre-image's end: up to l or the last entry, null but for u entries. */
    while (written < size || index >= 0) {
        snprintf(key, sizeof key, "%lld", (long long)written);
        int done;
        if (index == written) {
            done = e.op == UPD ? put_value(o, key, in->diff, e.kind, e.value, e.after)
                               : put_null(o, key);
            next_entry(in, &entry_pos, diff_end, &index, &e);
        } else {
            done = put_null(o, key);
        }
        if (done) return done;
        written++;
    }
    return 0;
}

static const char *const UPDATE_FIELDS[] = {"$v", "diff", "_id"};

/* The update's diff (its start), or -1 when the update is not a plain $v: 2 delta. */
static Py_ssize_t delta_of(const unsigned char *update, Py_ssize_t len) {
    Span f[3];
    if (find_fields(update, len, 0, UPDATE_FIELDS, 3, f) || f[2].kind != 0 || f[0].kind != 0x10 ||
        i32(update + f[0].pos) != 2 || f[1].kind != 0x03) {
        return -1;
    }
    return f[1].pos;
}

/* Whether the update's top level names _id, or the document holds it after another field:
 * bson.encode writes a top-level _id first, which a copy would not. */
static int moves_id(const unsigned char *pre, Py_ssize_t pre_len, const unsigned char *update,
                    Py_ssize_t diff) {
    Entry entries[MAX_LEVEL_ENTRIES];
    int count;
    read_level(update, diff, entries, &count, NO_CHECK); /* checked */
    for (int i = 0; i < count; i++) {
        if (strcmp(entries[i].name, "_id") == 0) return 1;
    }
    Py_ssize_t end = pre_len - 1, pos = 4;
    int kind;
    const unsigned char *name;
    Py_ssize_t value, after;
    for (int first = 1; pos < end; first = 0, pos = after) {
        if (element_at(pre, pos, end, &kind, &name, &value, &after)) return 1;
        if (is_named(name, "_id")) return !first;
    }
    return 0;
}

static PyObject *apply_diff(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer document, update;
    if (!PyArg_ParseTuple(args, "y*y*:apply_diff", &document, &update)) return NULL;
    PyObject *result = NULL;
    const unsigned char *pre = document.buf, *up = update.buf;
    Py_ssize_t diff;
    if (!bson_valid(pre, document.len, MAX_NESTING) || !bson_valid(up, update.len, MAX_NESTING) ||
        (diff = delta_of(up, update.len)) < 0 || check_diff(up, diff, 0) ||
        is_array_diff(up, diff) || moves_id(pre, document.len, up, diff)) {
        result = Py_NewRef(Py_None);
    } else {
        Inputs in = {pre, up};
        Out o = {NULL, 0, 0};
        Py_ssize_t at = open_doc(&o);
        int done = at < 0 ? -1 : apply_document(&o, &in, 0, diff);
        if (done == 0) done = close_doc(&o, at);
        if (done == 0) {
            result = PyBytes_FromStringAndSize(o.buf, o.len);
        } else if (done == FALLBACK) {
            result = Py_NewRef(Py_None);
        }
        PyMem_Free(o.buf);
    }
    PyBuffer_Release(&document);
    PyBuffer_Release(&update);
    return result;
}

static PyMethodDef METHODS[] = {
    {"apply_diff", apply_diff, METH_VARARGS,
     "apply_diff(document, update): the updated document's BSON, or None (the reference's)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_apply_diff", NULL, -1, METHODS};

PyMODINIT_FUNC PyInit__apply_diff(void) { return PyModule_Create(&MODULE); }
