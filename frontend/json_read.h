/* json_read.h - a small bounded JSON reader: the whole document becomes a flat
 * array of nodes (jsmn-style), each subtree contiguous, so walking it needs no
 * pointers and freeing it is two frees.
 *
 *   mp_jdoc d;
 *   if (mp_jdoc_load(path, &d, &err)) ...            // bounded: size, depth, nodes
 *   int32_t nodes = mp_jdoc_member(&d, 0, "nodes");  // node 0 is the root
 *   for (int32_t i = mp_jdoc_first(&d, nodes); i >= 0; i = mp_jdoc_next(&d, nodes, i)) ...
 *   mp_jdoc_free(&d);
 *
 * Strict RFC 8259 (no comments, no trailing commas); strings are decoded to
 * UTF-8 (\u escapes and surrogate pairs included). Errors name the line.
 */
#ifndef MP_JSON_READ_H
#define MP_JSON_READ_H

#include "ir/ir.h"

#define MP_JDOC_MAX_BYTES ((size_t)1 << 30) /* 1 GiB: the largest file mp_jdoc_load reads */
#define MP_JDOC_MAX_DEPTH 64
#define MP_JDOC_MAX_NODES (INT32_C(1) << 28)

typedef enum mp_jtype { MP_JNULL = 0, MP_JBOOL, MP_JNUM, MP_JSTR, MP_JARR, MP_JOBJ } mp_jtype;

typedef struct mp_jnode {
    mp_jtype type;
    bool b;                 /* BOOL */
    bool is_int;            /* NUM written as an integer that fits int64 (i holds it) */
    int64_t i;
    double num;             /* NUM */
    int32_t count;          /* ARR: elements; OBJ: members (each a STR key node, then its value) */
    int32_t end;            /* index just past this node's subtree */
    const char *str;        /* STR: decoded, NUL-terminated */
    int32_t len;            /* STR: bytes */
} mp_jnode;

typedef struct mp_jdoc {
    mp_jnode *node;         /* n nodes; node 0 is the root value */
    int32_t n, cap;
    char *strings;          /* decoded string bytes */
} mp_jdoc;

/* Parses text[0..len); fails naming the line on bad or truncated JSON, or past the limits. */
int mp_jdoc_parse(const char *text, size_t len, mp_jdoc *d, mp_err *err);
/* Reads and parses a whole file (at most MP_JDOC_MAX_BYTES). */
int mp_jdoc_load(const char *path, mp_jdoc *d, mp_err *err);
void mp_jdoc_free(mp_jdoc *d);

/* The value of key in object obj, -1 when absent (or obj is not an object). */
int32_t mp_jdoc_member(const mp_jdoc *d, int32_t obj, const char *key);
/* Children of an array (values) or object (keys: the value is key + 1); -1 past the last. */
int32_t mp_jdoc_first(const mp_jdoc *d, int32_t parent);
int32_t mp_jdoc_next(const mp_jdoc *d, int32_t parent, int32_t child);

#endif
