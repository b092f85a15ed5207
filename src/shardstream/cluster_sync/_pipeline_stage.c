/* One stage of an update's pipeline, as diff_to_pipeline.py's _stage builds it: the change
 * at a path of the document (_update_pipeline.h), each level on the way down bound by $let
 * and rebuilt on the way up. Each builder writes one element named `as` and returns 0, or -1
 * with MemoryError set; the names follow diff_to_pipeline.py's functions. */
#include "_update_pipeline.h"

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
int put_stage(Pipeline *p, const Change *c, const char *kind) {
    char at[24];
    snprintf(at, sizeof at, "%zd", p->stages++);
    Rebuild top = {c, kind, 0, "$$ROOT"};
    Py_ssize_t stage = open_element(p->o, 0x03, at);
    if (stage < 0 || put_rebuilt(p, "$replaceWith", &top)) return -1;
    return close_doc(p->o, stage);
}
