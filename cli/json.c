/* json.c - the streaming JSON writer (see json.h). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

void mp_json_init(mp_json *j, FILE *f, int indent)
{
    memset(j, 0, sizeof *j);
    j->f = f;
    j->indent = indent < 0 ? 0 : indent;
}

/* Line break and indent before a member (or the closing bracket); inside an
 * inline array only a space after each comma. */
static void newline(mp_json *j, bool after_comma)
{
    if (!j->indent) return;
    if (j->inline_from) {
        if (after_comma) fputc(' ', j->f);
        return;
    }
    fputc('\n', j->f);
    for (int i = 0; i < j->depth * j->indent; i++) fputc(' ', j->f);
}

/* Called before every value: checks that one is allowed here and writes the
 * separator that goes before it. */
static bool before_value(mp_json *j)
{
    if (j->done) return j->bad = true, false;
    if (j->depth == 0) return true;
    if (j->in_object[j->depth - 1]) {
        if (!j->key_pending) return j->bad = true, false;
        j->key_pending = false;
        return true;
    }
    bool comma = j->count[j->depth - 1]++ > 0;
    if (comma) fputc(',', j->f);
    newline(j, comma);
    return true;
}

static void after_value(mp_json *j)
{
    if (j->depth == 0) j->done = true;
}

static void begin(mp_json *j, bool object, bool one_line)
{
    if (!before_value(j)) return;
    if (j->depth == MP_JSON_MAX_DEPTH) {
        j->bad = true;
        return;
    }
    fputc(object ? '{' : '[', j->f);
    j->in_object[j->depth] = object;
    j->count[j->depth] = 0;
    j->depth++;
    if (one_line && !j->inline_from) j->inline_from = j->depth;
}

void mp_json_begin_object(mp_json *j) { begin(j, true, false); }
void mp_json_begin_array(mp_json *j) { begin(j, false, false); }
void mp_json_begin_inline_array(mp_json *j) { begin(j, false, true); }

void mp_json_end(mp_json *j)
{
    if (j->depth == 0 || j->key_pending) {
        j->bad = true;
        return;
    }
    bool object = j->in_object[j->depth - 1];
    bool empty = j->count[j->depth - 1] == 0;
    if (!empty) {
        j->depth--;
        newline(j, false);
        j->depth++;
    }
    if (j->inline_from == j->depth) j->inline_from = 0;
    j->depth--;
    fputc(object ? '}' : ']', j->f);
    after_value(j);
}

void mp_json_key(mp_json *j, const char *key)
{
    if (j->depth == 0 || !j->in_object[j->depth - 1] || j->key_pending || !key) {
        j->bad = true;
        return;
    }
    bool comma = j->count[j->depth - 1]++ > 0;
    if (comma) fputc(',', j->f);
    newline(j, comma);
    mp_json_write_string(j->f, key, strlen(key));
    fputs(j->indent ? ": " : ":", j->f);
    j->key_pending = true;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid:
 * rejects overlong forms, surrogates and code points above U+10FFFF. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07, min = 0x10000;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

void mp_json_write_string(FILE *f, const char *str, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc((int)c, f);
            i++;
        } else if (c < 0x20) {
            const char *short_esc = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
            if (short_esc)
                fputs(short_esc, f);
            else
                fprintf(f, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
            i++;
        } else if (c < 0x80) {
            fputc((int)c, f);
            i++;
        } else {
            size_t len = utf8_len(s + i, n - i);
            if (len) {
                fwrite(s + i, 1, len, f);
                i += len;
            } else {
                fputs("\\ufffd", f);
                i++;
            }
        }
    }
    fputc('"', f);
}

void mp_json_strn(mp_json *j, const char *s, size_t n)
{
    if (!before_value(j)) return;
    mp_json_write_string(j->f, s, n);
    after_value(j);
}

void mp_json_str(mp_json *j, const char *s)
{
    if (!s) {
        mp_json_null(j);
        return;
    }
    mp_json_strn(j, s, strlen(s));
}

void mp_json_int(mp_json *j, int64_t v)
{
    if (!before_value(j)) return;
    fprintf(j->f, "%" PRId64, v);
    after_value(j);
}

void mp_json_num(mp_json *j, double v)
{
    if (!isfinite(v)) {
        mp_json_null(j);
        return;
    }
    if (!before_value(j)) return;
    char buf[32];
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v); /* shortest of the two that round-trips */
    fputs(buf, j->f);
    after_value(j);
}

void mp_json_bool(mp_json *j, bool v)
{
    if (!before_value(j)) return;
    fputs(v ? "true" : "false", j->f);
    after_value(j);
}

void mp_json_null(mp_json *j)
{
    if (!before_value(j)) return;
    fputs("null", j->f);
    after_value(j);
}

int mp_json_finish(mp_json *j)
{
    if (j->bad || j->depth || !j->done) return -1;
    fputc('\n', j->f);
    return 0;
}
