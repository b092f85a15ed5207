/* An update's $v: 2 diff as the update pipeline diff_to_pipeline.py builds, written in C from
 * the diff's bytes: the same stages, field for field (tests/cluster_sync/
 * test_write_statements.py holds the two to each other). diff_to_pipeline.py's docstring says
 * what each stage does and why; the names below follow its functions.
 *
 * put_update_pipeline returns 0, FALLBACK where the Python walk must build it (a section or
 * an array entry it would refuse or read loosely: "dx", "u01x", an "l" that is not an int32),
 * or -1 with MemoryError set. */
#include "_bson_out.h"

#define MAX_PATH 256 /* the diff nests at most 200 levels (the event was checked) */

typedef enum { UNSET, SET, MOVE, GUARD_FIELD, RESIZE, SET_ELEMENT, GUARD_ELEMENT } ChangeKind;

typedef struct {
    ChangeKind kind;
    const char *name;  /* a field's change */
    int32_t index;     /* an element's change; RESIZE: the size */
    const char *type;  /* a guard's expected $type */
    int vkind;         /* SET, MOVE, SET_ELEMENT: the literal value's type and bytes */
    Py_ssize_t value, after;
} Change;

typedef struct {
    int is_index;
    const char *name;
    int32_t index;
} Step;

typedef struct {
    Out *o;
    const unsigned char *raw;
    Step path[MAX_PATH];
    int depth;
    Py_ssize_t stages;
} Pipeline;

typedef int (*ValueFn)(Pipeline *p, const char *as, const void *ctx);

/* -- expression builders (diff_to_pipeline's, one element each) ---------------------------- */

static int put_field_name(Out *o, const char *name) { /* _name */
    if (name[0] != '$') return put_cstring(o, "field", name);
    Py_ssize_t doc = open_element(o, 0x03, "field");
    return doc < 0 || put_cstring(o, "$literal", name) || close_doc(o, doc) ? -1 : 0;
}

static int put_get_field(Out *o, const char *as, const char *name, const char *level) {
    Py_ssize_t outer = open_element(o, 0x03, as), inner;
    if (outer < 0 || (inner = open_element(o, 0x03, "$getField")) < 0) return -1;
    if (put_field_name(o, name) || put_cstring(o, "input", level)) return -1;
    return close_doc(o, inner) || close_doc(o, outer) ? -1 : 0;
}

static int put_unset_field(Out *o, const char *as, const char *name, const char *level) {
    Py_ssize_t outer = open_element(o, 0x03, as), inner;
    if (outer < 0 || (inner = open_element(o, 0x03, "$unsetField")) < 0) return -1;
    if (put_field_name(o, name) || put_cstring(o, "input", level)) return -1;
    return close_doc(o, inner) || close_doc(o, outer) ? -1 : 0;
}

static int put_element_at(Out *o, const char *as, const char *level, int32_t index) {
    Py_ssize_t outer = open_element(o, 0x03, as), args;
    if (outer < 0 || (args = open_element(o, 0x04, "$arrayElemAt")) < 0) return -1;
    if (put_cstring(o, "0", level) || put_int32(o, "1", index)) return -1;
    return close_doc(o, args) || close_doc(o, outer) ? -1 : 0;
}

/* {$eq: [{$type: <subject>}, type]} as element "0" of a $cond: subject is the variable
 * `ref`, or (ref NULL) the child expression that `child` writes. */
static int put_type_is(Pipeline *p, const char *ref, ValueFn child, const void *ctx,
                       const char *type) {
    Out *o = p->o;
    Py_ssize_t eq = open_element(o, 0x03, "0"), args, of;
    if (eq < 0 || (args = open_element(o, 0x04, "$eq")) < 0) return -1;
    if ((of = open_element(o, 0x03, "0")) < 0) return -1;
    if (ref != NULL ? put_cstring(o, "$type", ref) : child(p, "$type", ctx)) return -1;
    if (close_doc(o, of) || put_cstring(o, "1", type)) return -1;
    return close_doc(o, args) || close_doc(o, eq) ? -1 : 0;
}

/* {$map: {input: {$range: [{$size: level}, end]}, in: null}}: one null per missing place. */
static int put_nulls(Out *o, const char *as, const char *level, int32_t end) {
    Py_ssize_t map = open_element(o, 0x03, as), body, range, args, size;
    if (map < 0 || (body = open_element(o, 0x03, "$map")) < 0) return -1;
    if ((range = open_element(o, 0x03, "input")) < 0) return -1;
    if ((args = open_element(o, 0x04, "$range")) < 0) return -1;
    if ((size = open_element(o, 0x03, "0")) < 0 || put_cstring(o, "$size", level)) return -1;
    if (close_doc(o, size) || put_int32(o, "1", end) || close_doc(o, args)) return -1;
    if (close_doc(o, range) || put_null(o, "in")) return -1;
    return close_doc(o, body) || close_doc(o, map) ? -1 : 0;
}

/* {$slice: [level, from(, count)]}. */
static int put_slice(Out *o, const char *as, const char *level, int32_t from, int with_count) {
    Py_ssize_t slice = open_element(o, 0x03, as), args;
    if (slice < 0 || (args = open_element(o, 0x04, "$slice")) < 0) return -1;
    if (put_cstring(o, "0", level) || put_int32(o, "1", from)) return -1;
    if (with_count && put_int32(o, "2", 2147483647)) return -1; /* _INT32_MAX */
    return close_doc(o, args) || close_doc(o, slice) ? -1 : 0;
}

/* _set_element: element index of level set to what `value` writes, nulls padding up to it. */
static int put_set_element(Pipeline *p, const char *as, const char *level, int32_t index,
                           ValueFn value, const void *ctx) {
    Out *o = p->o;
    Py_ssize_t concat = open_element(o, 0x03, as), parts, one;
    if (concat < 0 || (parts = open_element(o, 0x04, "$concatArrays")) < 0) return -1;
    int n = 0;
    if (index > 0) {
        if (put_slice(o, "0", level, index, 0) || put_nulls(o, "1", level, index)) return -1;
        n = 2;
    }
    char at[12];
    snprintf(at, sizeof at, "%d", n);
    if ((one = open_element(o, 0x04, at)) < 0 || value(p, "0", ctx) || close_doc(o, one)) return -1;
    snprintf(at, sizeof at, "%d", n + 1);
    if (put_slice(o, at, level, index + 1, 1)) return -1;
    return close_doc(o, parts) || close_doc(o, concat) ? -1 : 0;
}

/* -- the change at a level ------------------------------------------------------------------ */

typedef struct {
    const Change *change;
    const char *level;
} At;

static int put_literal(Pipeline *p, const char *as, const void *ctx) {
    const Change *c = ((const At *)ctx)->change;
    Py_ssize_t doc = open_element(p->o, 0x03, as);
    if (doc < 0 || put_value(p->o, "$literal", p->raw, c->vkind, c->value, c->after)) return -1;
    return close_doc(p->o, doc);
}

static int put_child_element(Pipeline *p, const char *as, const void *ctx) {
    const At *at = ctx;
    return put_element_at(p->o, as, at->level, at->change->index);
}

static int put_child_field(Pipeline *p, const char *as, const void *ctx) {
    const At *at = ctx;
    return put_get_field(p->o, as, at->change->name, at->level);
}

/* {$cond: [{$eq: [{$type: child}, type]}, child, null]}: the wrong type becomes null. */
static int put_checked(Pipeline *p, const char *as, ValueFn child, const void *ctx,
                       const char *type) {
    Py_ssize_t cond = open_element(p->o, 0x03, as), args;
    if (cond < 0 || (args = open_element(p->o, 0x04, "$cond")) < 0) return -1;
    if (put_type_is(p, NULL, child, ctx, type) || child(p, "1", ctx)) return -1;
    if (put_null(p->o, "2")) return -1;
    return close_doc(p->o, args) || close_doc(p->o, cond) ? -1 : 0;
}

static int put_guarded_element(Pipeline *p, const char *as, const void *ctx) {
    return put_checked(p, as, put_child_element, ctx, ((const At *)ctx)->change->type);
}

/* {$cond: [{$eq: [{$type: <x>}, "missing"]}, "$$REMOVE", <otherwise>]} (_keep_missing). */
static int put_keep_missing(Pipeline *p, const char *as, const char *ref, ValueFn child,
                            const void *ctx, ValueFn otherwise, const void *otherwise_ctx) {
    Py_ssize_t cond = open_element(p->o, 0x03, as), args;
    if (cond < 0 || (args = open_element(p->o, 0x04, "$cond")) < 0) return -1;
    if (put_type_is(p, ref, child, ctx, "missing") || put_cstring(p->o, "1", "$$REMOVE")) return -1;
    if (otherwise(p, "2", otherwise_ctx)) return -1;
    return close_doc(p->o, args) || close_doc(p->o, cond) ? -1 : 0;
}

static int put_guarded_field(Pipeline *p, const char *as, const void *ctx) {
    return put_checked(p, as, put_child_field, ctx, ((const At *)ctx)->change->type);
}

static int put_change(Pipeline *p, const char *as, const Change *c, const char *level) {
    Out *o = p->o;
    At at = {c, level};
    if (c->kind == SET_ELEMENT) return put_set_element(p, as, level, c->index, put_literal, &at);
    if (c->kind == GUARD_ELEMENT) {
        return put_set_element(p, as, level, c->index, put_guarded_element, &at);
    }
    if (c->kind == RESIZE) {
        Py_ssize_t doc, parts;
        if (c->index == 0) return (doc = open_element(o, 0x04, as)) < 0 ? -1 : close_doc(o, doc);
        if ((doc = open_element(o, 0x03, as)) < 0) return -1;
        if ((parts = open_element(o, 0x04, "$concatArrays")) < 0) return -1;
        if (put_slice(o, "0", level, c->index, 0) || put_nulls(o, "1", level, c->index)) return -1;
        return close_doc(o, parts) || close_doc(o, doc) ? -1 : 0;
    }
    if (c->kind == UNSET) return put_unset_field(o, as, c->name, level);
    Py_ssize_t doc = open_element(o, 0x03, as), set;
    if (doc < 0 || (set = open_element(o, 0x03, "$setField")) < 0) return -1;
    if (put_field_name(o, c->name)) return -1;
    if (c->kind == MOVE ? put_unset_field(o, "input", c->name, level)
                        : put_cstring(o, "input", level)) {
        return -1;
    }
    if (c->kind == GUARD_FIELD
            ? put_keep_missing(p, "value", NULL, put_child_field, &at, put_guarded_field, &at)
            : put_literal(p, "value", &at)) {
        return -1;
    }
    return close_doc(o, set) || close_doc(o, doc) ? -1 : 0;
}

/* -- one stage: descend the path, change the level, rebuild upwards (_rebuild) ---------------- */

typedef struct {
    const Change *change;
    const char *kind; /* the changed level's type: "object" or "array" */
    int i;            /* the path step this rebuilds */
    const char *level;
} Rebuild;

static int put_rebuilt(Pipeline *p, const char *as, const void *ctx);

/* {$cond: [{$eq: [{$type: ref}, wanted]}, <the level below, rebuilt>, ref]}. */
static int put_changed(Pipeline *p, const char *as, const void *ctx) {
    const Rebuild *r = ctx;
    char ref[16];
    snprintf(ref, sizeof ref, "$$p%d", r->i);
    const char *wanted = r->i == p->depth - 1     ? r->kind
                         : p->path[r->i + 1].is_index ? "array"
                                                      : "object";
    Rebuild below = {r->change, r->kind, r->i + 1, ref};
    Py_ssize_t cond = open_element(p->o, 0x03, as), args;
    if (cond < 0 || (args = open_element(p->o, 0x04, "$cond")) < 0) return -1;
    if (put_type_is(p, ref, NULL, NULL, wanted) || put_rebuilt(p, "1", &below)) return -1;
    if (put_cstring(p->o, "2", ref)) return -1;
    return close_doc(p->o, args) || close_doc(p->o, cond) ? -1 : 0;
}

static int put_rebuilt(Pipeline *p, const char *as, const void *ctx) {
    const Rebuild *r = ctx;
    if (r->i == p->depth) return put_change(p, as, r->change, r->level);
    Out *o = p->o;
    const Step *step = &p->path[r->i];
    char var[16], ref[16];
    snprintf(var, sizeof var, "p%d", r->i);
    snprintf(ref, sizeof ref, "$$p%d", r->i);
    Py_ssize_t doc = open_element(o, 0x03, as), let, vars;
    if (doc < 0 || (let = open_element(o, 0x03, "$let")) < 0) return -1;
    if ((vars = open_element(o, 0x03, "vars")) < 0) return -1;
    if (step->is_index ? put_element_at(o, var, r->level, step->index)
                       : put_get_field(o, var, step->name, r->level)) {
        return -1;
    }
    if (close_doc(o, vars)) return -1;
    if (step->is_index) {
        if (put_set_element(p, "in", r->level, step->index, put_changed, r)) return -1;
    } else {
        Py_ssize_t in = open_element(o, 0x03, "in"), set;
        if (in < 0 || (set = open_element(o, 0x03, "$setField")) < 0) return -1;
        if (put_field_name(o, step->name) || put_cstring(o, "input", r->level)) return -1;
        if (put_keep_missing(p, "value", ref, NULL, NULL, put_changed, r)) return -1;
        if (close_doc(o, set) || close_doc(o, in)) return -1;
    }
    return close_doc(o, let) || close_doc(o, doc) ? -1 : 0;
}

/* {"<n>": {$replaceWith: <the change at the current path, rebuilt>}}. */
static int put_stage(Pipeline *p, const Change *c, const char *kind) {
    char at[24];
    snprintf(at, sizeof at, "%zd", p->stages++);
    Rebuild top = {c, kind, 0, "$$ROOT"};
    Py_ssize_t stage = open_element(p->o, 0x03, at);
    if (stage < 0 || put_rebuilt(p, "$replaceWith", &top)) return -1;
    return close_doc(p->o, stage);
}

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
