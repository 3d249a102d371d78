/* wire.c - protobuf wire format: fields, packed counts, descriptor-driven
 * validation, and a byte buffer for filtered copies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int mp_wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    const uint8_t *q = *p;
    for (int shift = 0; shift < 70; shift += 7) {
        if (q >= end) return -1;
        uint8_t b = *q++;
        x |= (uint64_t)(b & 0x7f) << (shift < 64 ? shift : 63);
        if (!(b & 0x80)) {
            *p = q;
            *v = x;
            return 0;
        }
    }
    return -1;
}

int mp_wire_next(mp_wire *w, mp_wire_field *f)
{
    if (w->p >= w->end) return 0;
    memset(f, 0, sizeof *f);
    f->start = w->p;
    const uint8_t *q = w->p;
    uint64_t tag;
    if (mp_wire_varint(&q, w->end, &tag)) {
        w->bad = q + 10 <= w->end ? MP_WIRE_BAD_VARINT : MP_WIRE_TRUNCATED;
        return -1;
    }
    f->num = (uint32_t)(tag >> 3);
    f->type = (int)(tag & 7);
    if (tag >> 3 == 0 || tag >> 3 > 0x1fffffff) {
        w->bad = MP_WIRE_BAD_TAG;
        return -1;
    }
    size_t left;
    switch (f->type) {
    case MP_WIRE_VARINT:
        if (mp_wire_varint(&q, w->end, &f->v)) {
            w->bad = (size_t)(w->end - q) >= 10 ? MP_WIRE_BAD_VARINT : MP_WIRE_TRUNCATED;
            return -1;
        }
        break;
    case MP_WIRE_I64:
    case MP_WIRE_I32: {
        size_t k = f->type == MP_WIRE_I64 ? 8 : 4;
        if ((size_t)(w->end - q) < k) {
            w->bad = MP_WIRE_TRUNCATED;
            return -1;
        }
        f->v = 0;
        for (size_t i = 0; i < k; i++) f->v |= (uint64_t)q[i] << (8 * i);
        q += k;
        break;
    }
    case MP_WIRE_LEN:
        if (mp_wire_varint(&q, w->end, &f->v)) {
            w->bad = (size_t)(w->end - q) >= 10 ? MP_WIRE_BAD_VARINT : MP_WIRE_TRUNCATED;
            return -1;
        }
        left = (size_t)(w->end - q);
        if (f->v > left) {
            w->bad = MP_WIRE_TRUNCATED;
            f->len = f->v > SIZE_MAX ? SIZE_MAX : (size_t)f->v;
            return -1;
        }
        f->data = q;
        f->len = (size_t)f->v;
        q += f->len;
        break;
    default: /* 3/4 are groups (ONNX has none), 6/7 do not exist */
        w->bad = MP_WIRE_BAD_TAG;
        return -1;
    }
    f->end = q;
    w->p = q;
    return 1;
}

const char *mp_wire_type_name(int type)
{
    static const char *const names[8] = {"varint", "fixed64", "length-delimited", "group start",
                                         "group end", "fixed32", "invalid (6)", "invalid (7)"};
    return type >= 0 && type < 8 ? names[type] : "?";
}

/* The wire type a field of this protobuf-c type uses when not packed. */
static int wire_type_of(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT: return MP_WIRE_I32;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return MP_WIRE_I64;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE: return MP_WIRE_LEN;
    default: return MP_WIRE_VARINT;
    }
}

int64_t mp_wire_packed_count(ProtobufCType t, const uint8_t *p, size_t n)
{
    switch (wire_type_of(t)) {
    case MP_WIRE_I32: return n % 4 ? -1 : (int64_t)(n / 4);
    case MP_WIRE_I64: return n % 8 ? -1 : (int64_t)(n / 8);
    case MP_WIRE_VARINT: {
        /* every element ends at a byte without the continuation bit */
        int64_t count = 0;
        size_t run = 0;
        for (size_t i = 0; i < n; i++) {
            if (p[i] & 0x80) {
                if (++run >= 10) return -1;
            } else {
                run = 0;
                count++;
            }
        }
        return run ? -1 : count;
    }
    default: return -1;
    }
}

/* ---- validation against a descriptor ---------------------------------- */

typedef struct check_ctx {
    const uint8_t *base;
    mp_err *err;
    char path[224];
    size_t plen;
} check_ctx;

static int check_fail(check_ctx *c, const uint8_t *at, const char *what)
{
    char where[240];
    if (c->plen)
        snprintf(where, sizeof where, "in %s", c->path);
    else
        snprintf(where, sizeof where, "at the top level");
    return mp_fail(c->err, "malformed protobuf %s: %s (byte %lld)", where, what, (long long)(at - c->base));
}

/* Appends printable text to the path, quoting names. */
static void path_add(check_ctx *c, const char *s, size_t n)
{
    for (size_t i = 0; i < n && c->plen + 2 < sizeof c->path; i++) {
        char ch = s[i];
        c->path[c->plen++] = ch >= 0x20 && ch < 0x7f ? ch : '?';
    }
    c->path[c->plen] = 0;
}

/* The first string field `name` of a message, found by a shallow scan. */
static int find_string(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n, const char *name,
                       const uint8_t **s, size_t *len)
{
    const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field_by_name(d, name);
    if (!fd || fd->type != PROTOBUF_C_TYPE_STRING) return -1;
    mp_wire w = {p, p + n, p, MP_WIRE_OK};
    mp_wire_field f;
    while (mp_wire_next(&w, &f) > 0)
        if (f.num == fd->id && f.type == MP_WIRE_LEN) {
            *s = f.data;
            *len = f.len < 40 ? f.len : 40;
            return 0;
        }
    return -1;
}

static bool packable(ProtobufCType t)
{
    return t != PROTOBUF_C_TYPE_STRING && t != PROTOBUF_C_TYPE_BYTES && t != PROTOBUF_C_TYPE_MESSAGE;
}

static int check_msg(check_ctx *c, const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n, int depth)
{
    char what[200];
    if (depth > MP_WIRE_MAX_DEPTH) {
        snprintf(what, sizeof what, "messages nested more than %d deep", MP_WIRE_MAX_DEPTH);
        return check_fail(c, p, what);
    }
    uint32_t counts[64] = {0};
    mp_wire w = {p, p + n, c->base, MP_WIRE_OK};
    mp_wire_field f;
    int r;
    while ((r = mp_wire_next(&w, &f)) > 0) {
        const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(d, (int)f.num);
        if (!fd) continue; /* unknown fields are kept and skipped by protobuf-c */
        size_t k = (size_t)(fd - d->fields);
        uint32_t index = k < 64 ? counts[k]++ : 0;
        bool repeated = fd->label == PROTOBUF_C_LABEL_REPEATED;
        int want = wire_type_of(fd->type);
        if (f.type != want) {
            if (repeated && f.type == MP_WIRE_LEN && packable(fd->type)) {
                if (mp_wire_packed_count(fd->type, f.data, f.len) < 0) {
                    snprintf(what, sizeof what, "packed field '%s' (%u) does not hold whole elements", fd->name, f.num);
                    return check_fail(c, f.start, what);
                }
                continue;
            }
            snprintf(what, sizeof what, "%s field '%s' (%u) has wire type %s, expected %s", d->short_name, fd->name,
                     f.num, mp_wire_type_name(f.type), mp_wire_type_name(want));
            return check_fail(c, f.start, what);
        }
        if (fd->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        const ProtobufCMessageDescriptor *sub = fd->descriptor;
        size_t saved = c->plen;
        char seg[80];
        snprintf(seg, sizeof seg, repeated ? "%s%s[%u]" : "%s%s", c->plen ? "." : "", fd->name, index);
        path_add(c, seg, strlen(seg));
        const uint8_t *s;
        size_t slen;
        if (!find_string(sub, f.data, f.len, "name", &s, &slen) && slen) {
            path_add(c, " '", 2);
            path_add(c, (const char *)s, slen);
            path_add(c, "'", 1);
        }
        if (!find_string(sub, f.data, f.len, "op_type", &s, &slen)) {
            path_add(c, " (", 2);
            path_add(c, (const char *)s, slen);
            path_add(c, ")", 1);
        }
        if (check_msg(c, sub, f.data, f.len, depth + 1)) return -1;
        c->plen = saved;
        c->path[saved] = 0;
    }
    if (r == 0) return 0;
    if (w.bad == MP_WIRE_TRUNCATED) {
        snprintf(what, sizeof what, "field %u runs past the end of its %s", f.num,
                 depth ? "enclosing message" : "data");
    } else if (w.bad == MP_WIRE_BAD_VARINT) {
        snprintf(what, sizeof what, "a varint is longer than 10 bytes");
    } else {
        snprintf(what, sizeof what, "invalid tag (field %u, wire type %s)", f.num, mp_wire_type_name(f.type));
    }
    return check_fail(c, w.p, what);
}

int mp_wire_check(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n, const uint8_t *base,
                  const char *root, mp_err *err)
{
    check_ctx c = {.base = base, .err = err};
    if (root && *root) path_add(&c, root, strlen(root));
    return check_msg(&c, d, p, n, 0);
}

/* ---- buffers ------------------------------------------------------------- */

void mp_wbuf_put(mp_wbuf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            fprintf(stderr, "memplan: out of memory\n");
            abort();
        }
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}

void mp_wbuf_varint(mp_wbuf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t k = 0;
    do {
        tmp[k] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) tmp[k] |= 0x80;
        k++;
    } while (v);
    mp_wbuf_put(b, tmp, k);
}

void mp_wbuf_field(mp_wbuf *b, uint32_t num, const void *p, size_t n)
{
    mp_wbuf_varint(b, (uint64_t)num << 3 | MP_WIRE_LEN);
    mp_wbuf_varint(b, n);
    mp_wbuf_put(b, p, n);
}
