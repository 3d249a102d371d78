/* json_read.c - recursive descent over the text, depth-bounded; nodes go to a
 * growing array in document order, strings to one buffer sized by the text
 * (a decoded string and its NUL never exceed its quoted source). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/json_read.h"

typedef struct reader {
    const char *s;
    size_t len, pos;
    mp_jdoc *d;
    size_t used;            /* bytes of d->strings in use */
    mp_err *err;
} reader;

static int fail_at(reader *r, const char *what)
{
    size_t line = 1, n = r->pos < r->len ? r->pos : r->len;
    for (size_t i = 0; i < n; i++) line += r->s[i] == '\n';
    if (r->pos >= r->len) return mp_fail(r->err, "JSON: unexpected end of file (truncated?) at line %zu", line);
    return mp_fail(r->err, "JSON: %s at line %zu", what, line);
}

static void skip_ws(reader *r)
{
    while (r->pos < r->len && (r->s[r->pos] == ' ' || r->s[r->pos] == '\t' || r->s[r->pos] == '\n' ||
                               r->s[r->pos] == '\r'))
        r->pos++;
}

static int32_t new_node(reader *r, mp_jtype t)
{
    mp_jdoc *d = r->d;
    if (d->n == d->cap) {
        if (d->cap >= MP_JDOC_MAX_NODES) return fail_at(r, "too many values"), -1;
        int32_t cap = d->cap ? (d->cap > MP_JDOC_MAX_NODES / 2 ? MP_JDOC_MAX_NODES : 2 * d->cap) : 256;
        mp_jnode *p = realloc(d->node, (size_t)cap * sizeof *p);
        if (!p) return mp_fail(r->err, "JSON: out of memory"), -1;
        d->node = p;
        d->cap = cap;
    }
    mp_jnode *x = &d->node[d->n];
    memset(x, 0, sizeof *x);
    x->type = t;
    return d->n++;
}

static int hex4(reader *r, unsigned *out)
{
    if (r->len - r->pos < 4) return fail_at(r, "bad \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = r->s[r->pos++];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return fail_at(r, "bad \\u escape");
    }
    *out = v;
    return 0;
}

static void put_utf8(char *o, size_t *n, unsigned cp)
{
    if (cp < 0x80) {
        o[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        o[(*n)++] = (char)(0xC0 | cp >> 6);
        o[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        o[(*n)++] = (char)(0xE0 | cp >> 12);
        o[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        o[(*n)++] = (char)(0xF0 | cp >> 18);
        o[(*n)++] = (char)(0x80 | (cp >> 12 & 0x3F));
        o[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* At the opening quote. The decoded bytes start at d->strings + used. */
static int32_t parse_string(reader *r)
{
    int32_t id = new_node(r, MP_JSTR);
    if (id < 0) return -1;
    char *o = r->d->strings + r->used;
    size_t n = 0;
    r->pos++;
    for (;;) {
        if (r->pos >= r->len) return fail_at(r, ""), -1;
        unsigned char c = (unsigned char)r->s[r->pos++];
        if (c == '"') break;
        if (c < 0x20) return fail_at(r, "control character in a string"), -1;
        if (c != '\\') {
            o[n++] = (char)c;
            continue;
        }
        if (r->pos >= r->len) return fail_at(r, ""), -1;
        char e = r->s[r->pos++];
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *k = strchr(from, e);
        if (e && k) {
            o[n++] = to[k - from];
            continue;
        }
        if (e != 'u') return fail_at(r, "bad escape in a string"), -1;
        unsigned cp;
        if (hex4(r, &cp)) return -1;
        if (cp >= 0xD800 && cp < 0xDC00) { /* a high surrogate needs its low half */
            unsigned lo;
            if (r->len - r->pos < 2 || r->s[r->pos] != '\\' || r->s[r->pos + 1] != 'u')
                return fail_at(r, "unpaired surrogate in a string"), -1;
            r->pos += 2;
            if (hex4(r, &lo)) return -1;
            if (lo < 0xDC00 || lo >= 0xE000) return fail_at(r, "unpaired surrogate in a string"), -1;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
            return fail_at(r, "unpaired surrogate in a string"), -1;
        }
        if (cp == 0) return fail_at(r, "NUL character in a string"), -1;
        put_utf8(o, &n, cp);
    }
    o[n] = 0;
    if (n > INT32_MAX) return fail_at(r, "string too long"), -1;
    mp_jnode *x = &r->d->node[id];
    x->i = (int64_t)r->used; /* an offset until the buffer is final: see mp_jdoc_parse */
    x->len = (int32_t)n;
    x->end = id + 1;
    r->used += n + 1;
    return id;
}

static int32_t parse_number(reader *r)
{
    size_t start = r->pos;
    const char *s = r->s;
    bool integral = true;
    if (r->pos < r->len && s[r->pos] == '-') r->pos++;
    if (r->pos >= r->len || s[r->pos] < '0' || s[r->pos] > '9') return fail_at(r, "bad number"), -1;
    if (s[r->pos] == '0') r->pos++;
    else
        while (r->pos < r->len && s[r->pos] >= '0' && s[r->pos] <= '9') r->pos++;
    if (r->pos < r->len && s[r->pos] == '.') {
        integral = false;
        r->pos++;
        if (r->pos >= r->len || s[r->pos] < '0' || s[r->pos] > '9') return fail_at(r, "bad number"), -1;
        while (r->pos < r->len && s[r->pos] >= '0' && s[r->pos] <= '9') r->pos++;
    }
    if (r->pos < r->len && (s[r->pos] == 'e' || s[r->pos] == 'E')) {
        integral = false;
        r->pos++;
        if (r->pos < r->len && (s[r->pos] == '+' || s[r->pos] == '-')) r->pos++;
        if (r->pos >= r->len || s[r->pos] < '0' || s[r->pos] > '9') return fail_at(r, "bad number"), -1;
        while (r->pos < r->len && s[r->pos] >= '0' && s[r->pos] <= '9') r->pos++;
    }
    char buf[128];
    size_t n = r->pos - start;
    if (n >= sizeof buf) return fail_at(r, "number too long"), -1;
    memcpy(buf, s + start, n);
    buf[n] = 0;
    int32_t id = new_node(r, MP_JNUM);
    if (id < 0) return -1;
    mp_jnode *x = &r->d->node[id];
    x->num = strtod(buf, NULL);
    x->end = id + 1;
    if (integral) {
        errno = 0;
        long long v = strtoll(buf, NULL, 10);
        x->is_int = errno != ERANGE;
        x->i = x->is_int ? v : 0;
    }
    return id;
}

static int32_t parse_value(reader *r, int depth);

/* Arrays and objects: elements (objects: key, ':', value) separated by commas. */
static int32_t parse_container(reader *r, int depth, bool object)
{
    if (depth >= MP_JDOC_MAX_DEPTH) return fail_at(r, "nested too deeply"), -1;
    int32_t id = new_node(r, object ? MP_JOBJ : MP_JARR);
    if (id < 0) return -1;
    char close = object ? '}' : ']';
    int32_t count = 0;
    r->pos++;
    skip_ws(r);
    if (r->pos < r->len && r->s[r->pos] == close) {
        r->pos++;
    } else {
        for (;;) {
            skip_ws(r);
            if (object) {
                if (r->pos >= r->len || r->s[r->pos] != '"') return fail_at(r, "expected a key string"), -1;
                if (parse_string(r) < 0) return -1;
                skip_ws(r);
                if (r->pos >= r->len || r->s[r->pos] != ':') return fail_at(r, "expected ':'"), -1;
                r->pos++;
            }
            if (parse_value(r, depth + 1) < 0) return -1;
            count++;
            skip_ws(r);
            if (r->pos >= r->len) return fail_at(r, ""), -1;
            char c = r->s[r->pos++];
            if (c == close) break;
            if (c != ',') return fail_at(r, object ? "expected ',' or '}'" : "expected ',' or ']'"), -1;
        }
    }
    r->d->node[id].count = count;
    r->d->node[id].end = r->d->n;
    return id;
}

static int32_t literal(reader *r, const char *word, mp_jtype t, bool b)
{
    size_t n = strlen(word);
    if (r->len - r->pos < n || memcmp(r->s + r->pos, word, n)) return fail_at(r, "unexpected character"), -1;
    r->pos += n;
    int32_t id = new_node(r, t);
    if (id < 0) return -1;
    r->d->node[id].b = b;
    r->d->node[id].end = id + 1;
    return id;
}

static int32_t parse_value(reader *r, int depth)
{
    skip_ws(r);
    if (r->pos >= r->len) return fail_at(r, ""), -1;
    switch (r->s[r->pos]) {
    case '{': return parse_container(r, depth, true);
    case '[': return parse_container(r, depth, false);
    case '"': return parse_string(r);
    case 't': return literal(r, "true", MP_JBOOL, true);
    case 'f': return literal(r, "false", MP_JBOOL, false);
    case 'n': return literal(r, "null", MP_JNULL, false);
    default: return parse_number(r);
    }
}

void mp_jdoc_free(mp_jdoc *d)
{
    free(d->node);
    free(d->strings);
    memset(d, 0, sizeof *d);
}

int mp_jdoc_parse(const char *text, size_t len, mp_jdoc *d, mp_err *err)
{
    memset(d, 0, sizeof *d);
    if (len > MP_JDOC_MAX_BYTES) return mp_fail(err, "JSON: the document is larger than %zu bytes", MP_JDOC_MAX_BYTES);
    d->strings = malloc(len + 1);
    if (!d->strings) return mp_fail(err, "JSON: out of memory");
    reader r = {text, len, 0, d, 0, err};
    if (parse_value(&r, 0) < 0) goto fail;
    skip_ws(&r);
    if (r.pos < len) {
        fail_at(&r, "trailing characters after the document");
        goto fail;
    }
    for (int32_t i = 0; i < d->n; i++)
        if (d->node[i].type == MP_JSTR) {
            d->node[i].str = d->strings + d->node[i].i;
            d->node[i].i = 0;
        }
    return 0;
fail:
    mp_jdoc_free(d);
    return -1;
}

int mp_jdoc_load(const char *path, mp_jdoc *d, mp_err *err)
{
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "rb");
    if (!f) return mp_fail(err, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = -1;
    for (;;) {
        if (n == cap) {
            if (cap > MP_JDOC_MAX_BYTES) { /* the file did not end within the limit */
                mp_fail(err, "%s: larger than %zu bytes", path, MP_JDOC_MAX_BYTES);
                goto done;
            }
            cap = cap ? 2 * cap : 1 << 16;
            if (cap > MP_JDOC_MAX_BYTES) cap = MP_JDOC_MAX_BYTES + 1; /* one byte more tells a file too large */
            char *p = realloc(buf, cap);
            if (!p) {
                mp_fail(err, "%s: out of memory", path);
                goto done;
            }
            buf = p;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
    }
    if (ferror(f)) {
        mp_fail(err, "%s: read error", path);
        goto done;
    }
    rc = mp_jdoc_parse(buf, n, d, err);
    if (rc) {
        char msg[sizeof err->msg + 4096]; /* the path and the message; mp_fail keeps what fits */
        snprintf(msg, sizeof msg, "%s: %s", path, err->msg);
        mp_fail(err, "%s", msg);
    }
done:
    free(buf);
    fclose(f);
    return rc;
}

int32_t mp_jdoc_member(const mp_jdoc *d, int32_t obj, const char *key)
{
    if (obj < 0 || obj >= d->n || d->node[obj].type != MP_JOBJ) return -1;
    for (int32_t k = mp_jdoc_first(d, obj); k >= 0; k = mp_jdoc_next(d, obj, k))
        if (!strcmp(d->node[k].str, key)) return k + 1;
    return -1;
}

int32_t mp_jdoc_first(const mp_jdoc *d, int32_t parent)
{
    if (parent < 0 || parent >= d->n || d->node[parent].count == 0) return -1;
    return d->node[parent].type == MP_JARR || d->node[parent].type == MP_JOBJ ? parent + 1 : -1;
}

int32_t mp_jdoc_next(const mp_jdoc *d, int32_t parent, int32_t child)
{
    /* an object member is its key node then its value's subtree */
    int32_t next = d->node[parent].type == MP_JOBJ ? d->node[child + 1].end : d->node[child].end;
    return next < d->node[parent].end ? next : -1;
}
