/* The walk over a change event's top level that both row readers share (see _event_walk.h). */
#include "_event_walk.h"

static const char *const FIELD_NAMES[FIELDS] = {
    "_id", "operationType", "clusterTime", "wallTime", "ns", "collectionUUID", "documentKey",
    "fullDocument", "updateDescription", "fullDocumentBeforeChange", "to",
    "operationDescription", "txnNumber", "lsid"};

static const char *const NS_NAMES[2] = {"db", "coll"};

#define MIN_DATETIME_MS (-62135596800000LL) /* 0001-01-01T00:00:00Z */
#define MAX_DATETIME_MS 253402300799999LL   /* 9999-12-31T23:59:59.999Z */

Py_ssize_t value_end(const unsigned char *raw, int kind, Py_ssize_t pos, Py_ssize_t end) {
    int64_t size;
    const unsigned char *p;
    switch (kind) {
        case 0x01: case 0x09: case 0x11: case 0x12: size = 8; break;
        case 0x10: size = 4; break;
        case 0x07: size = 12; break;
        case 0x08: size = 1; break;
        case 0x06: case 0x0A: case 0x7F: case 0xFF: size = 0; break;
        case 0x13: size = 16; break;
        case 0x02: case 0x0D: case 0x0E: case 0x0C: /* length-prefixed string (+ ObjectId) */
            if (pos + 4 > end) return -1;
            size = 4 + (int64_t)i32(raw + pos) + (kind == 0x0C ? 12 : 0);
            if (size < 5) return -1;
            break;
        case 0x03: case 0x04: case 0x0F:
            if (pos + 4 > end) return -1;
            size = i32(raw + pos);
            if (size < 5) return -1;
            break;
        case 0x05:
            if (pos + 5 > end) return -1;
            size = 5 + (int64_t)i32(raw + pos);
            if (size < 5) return -1;
            break;
        case 0x0B: /* regex: pattern and flags, two C strings */
            if ((p = memchr(raw + pos, 0, end - pos)) == NULL) return -1;
            p++;
            if ((p = memchr(p, 0, raw + end - p)) == NULL) return -1;
            return p - raw + 1;
        default:
            return -1;
    }
    return size > end - pos ? -1 : pos + (Py_ssize_t)size;
}

int find_fields(const unsigned char *raw, Py_ssize_t len, Py_ssize_t start,
                const char *const *names, int count, Span *spans) {
    memset(spans, 0, sizeof(Span) * count);
    if (start + 5 > len) return FALLBACK;
    int32_t size = i32(raw + start);
    Py_ssize_t end = start + size - 1;
    if (size < 5 || end >= len || raw[end] != 0) return FALLBACK;
    Py_ssize_t pos = start + 4;
    while (pos < end) {
        int kind;
        const unsigned char *name;
        Py_ssize_t value, after;
        if (element_at(raw, pos, end, &kind, &name, &value, &after)) return FALLBACK;
        for (int i = 0; i < count; i++) {
            if (is_named(name, names[i])) {
                spans[i] = (Span){kind, value, after};
                break;
            }
        }
        pos = after;
    }
    return pos == end ? 0 : FALLBACK;
}

int string_bytes(const unsigned char *raw, Span s, const char **text, Py_ssize_t *n) {
    if (s.kind != 0x02 || raw[s.end - 1] != 0) return FALLBACK;
    const unsigned char *p = raw + s.pos + 4;
    Py_ssize_t size = s.end - s.pos - 5;
    for (Py_ssize_t i = 0; i < size; i++) {
        if (p[i] < 0x80) continue;
        /* Not ASCII: Python's strict decoder judges (rare: names and types are ASCII). */
        PyObject *decoded = PyUnicode_DecodeUTF8((const char *)p, size, "strict");
        if (decoded == NULL) {
            PyErr_Clear();
            return FALLBACK;
        }
        Py_DECREF(decoded);
        break;
    }
    *text = (const char *)p, *n = size;
    return 0;
}

static void uuid_chars(const unsigned char *b, char *text) {
    for (int i = 0, w = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) text[w++] = '-';
        text[w++] = HEX[b[i] >> 4], text[w++] = HEX[b[i] & 15];
    }
}

/* The scalar fields (clusterTime, wallTime, collectionUUID, txnNumber) into w. */
static int scalars(const unsigned char *raw, EventWalk *w) {
    Span t = w->f[CLUSTER_TIME], m = w->f[WALL_TIME], u = w->f[COLLECTION_UUID];
    Span n = w->f[TXN_NUMBER];
    w->has_uuid = u.kind == 0x05 && raw[u.pos + 4] == 4;
    if (w->has_uuid && i32(raw + u.pos) != 16) return FALLBACK; /* as_uuid() refuses it */
    if (n.kind != 0x10 && n.kind != 0x12 && !absent(n)) return FALLBACK;
    if ((w->has_time = t.kind == 0x11)) {
        uint64_t v = u64(raw + t.pos); /* increment, then time */
        w->time = (uint32_t)(v >> 32), w->inc = (uint32_t)(v & 0xffffffffu);
    }
    w->wall_ms = m.kind == 0x09 ? (int64_t)u64(raw + m.pos) : 0;
    w->has_wall = m.kind == 0x09 && w->wall_ms >= MIN_DATETIME_MS && w->wall_ms <= MAX_DATETIME_MS;
    if (w->has_uuid) uuid_chars(raw + u.pos + 5, w->uuid);
    w->has_txn = n.kind == 0x10 || n.kind == 0x12;
    w->txn = n.kind == 0x10 ? i32(raw + n.pos) : n.kind == 0x12 ? (int64_t)u64(raw + n.pos) : 0;
    return 0;
}

int walk_event(const unsigned char *raw, Py_ssize_t len, EventWalk *w) {
    if (len < 5 || i32(raw) != len) return FALLBACK; /* one whole document, nothing after it */
    int rc = find_fields(raw, len, 0, FIELD_NAMES, FIELDS, w->f);
    if (rc) return rc;
    memset(w->ns, 0, sizeof w->ns);
    if (w->f[NS].kind == 0x03 && (rc = find_fields(raw, len, w->f[NS].pos, NS_NAMES, 2, w->ns))) {
        return rc;
    }
    return scalars(raw, w);
}
