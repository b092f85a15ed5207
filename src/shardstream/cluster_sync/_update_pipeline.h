/* What _pipeline_stage.c (one stage: a change at a path, rebuilt up to the root) and
 * _update_pipeline.c (the diff's walk, which says which stages) share. */
#ifndef SHARDSTREAM_UPDATE_PIPELINE_H
#define SHARDSTREAM_UPDATE_PIPELINE_H

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

/* Stage p->stages (then counted) of the pipeline: {$replaceWith: <c at p->path, rebuilt>},
 * c a change of a level of type kind ("object" or "array"). 0, or -1 (MemoryError). */
int put_stage(Pipeline *p, const Change *c, const char *kind);

#endif
