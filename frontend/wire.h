/* wire.h - the protobuf wire format, walked by hand.
 *
 *   mp_wire w = {buf, buf + n, buf};
 *   mp_wire_field f;
 *   while ((r = mp_wire_next(&w, &f)) > 0)
 *       if (f.num == 7 && f.type == MP_WIRE_LEN) walk(f.data, f.len);
 *   if (r < 0) ... w.bad says why
 *
 * The importer uses it to find tensor payloads without copying them, to drop
 * those payloads from the bytes handed to protobuf-c, and (mp_wire_check) to
 * validate a whole message against its protobuf-c descriptor first, so that a
 * bad file gets a message naming where it is bad and protobuf-c never sees
 * input deep enough to exhaust the stack.
 */
#ifndef MP_WIRE_H
#define MP_WIRE_H

#include <protobuf-c/protobuf-c.h>  /* defines: ProtobufCMessageDescriptor */
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

enum { MP_WIRE_VARINT = 0, MP_WIRE_I64 = 1, MP_WIRE_LEN = 2, MP_WIRE_I32 = 5 };

/* Why mp_wire_next stopped early. */
typedef enum mp_wire_bad {
    MP_WIRE_OK = 0,
    MP_WIRE_TRUNCATED,  /* a field runs past the end of its message */
    MP_WIRE_BAD_TAG,    /* field number 0, or a wire type protobuf does not have (or groups) */
    MP_WIRE_BAD_VARINT, /* more than 10 bytes */
} mp_wire_bad;

typedef struct mp_wire {
    const uint8_t *p, *end; /* cursor and end of the message */
    const uint8_t *base;    /* start of the whole buffer, for byte offsets in messages */
    mp_wire_bad bad;
} mp_wire;

typedef struct mp_wire_field {
    uint32_t num;
    int type;               /* MP_WIRE_* */
    uint64_t v;             /* VARINT, I64, I32: the value */
    const uint8_t *data;    /* LEN: the payload */
    size_t len;
    const uint8_t *start;   /* first byte of the tag: [start, end) is the whole field */
    const uint8_t *end;
} mp_wire_field;

/* Reads one varint; 0, or -1 when truncated or longer than 10 bytes. */
int mp_wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v);
/* 1: read a field; 0: end of message; -1: malformed (w->bad says why). */
int mp_wire_next(mp_wire *w, mp_wire_field *f);
const char *mp_wire_type_name(int type);

/* Elements in a packed repeated field of this protobuf-c type; -1 if the bytes
 * are not a whole number of elements. */
int64_t mp_wire_packed_count(ProtobufCType t, const uint8_t *p, size_t n);

/* Checks that [p, p+n) is a valid message of type d, recursively: wire types
 * match the fields, lengths stay inside their messages, packed fields hold
 * whole elements, nesting stays under MP_WIRE_MAX_DEPTH. On failure err says
 * where (e.g. "graph.node[3] 'conv1' (Conv).attribute[0]: ...") and at which
 * byte offset from base. */
#define MP_WIRE_MAX_DEPTH 96
int mp_wire_check(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n, const uint8_t *base,
                  const char *root, mp_err *err);

/* A growing byte buffer (malloc'd; freed by the caller). */
typedef struct mp_wbuf {
    uint8_t *p;
    size_t n, cap;
} mp_wbuf;

void mp_wbuf_put(mp_wbuf *b, const void *p, size_t n);
void mp_wbuf_varint(mp_wbuf *b, uint64_t v);
/* Appends a length-delimited field: tag, length, bytes. */
void mp_wbuf_field(mp_wbuf *b, uint32_t num, const void *p, size_t n);

#endif
