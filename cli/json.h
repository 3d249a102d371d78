/* json.h - a small streaming JSON writer: values go straight to a FILE*,
 * commas, indentation and string escaping are handled here.
 *
 *   mp_json j;
 *   mp_json_init(&j, stdout, 2);            // indent 2; 0 = one line
 *   mp_json_begin_object(&j);
 *   mp_json_key(&j, "nodes"); mp_json_int(&j, 175);
 *   mp_json_key(&j, "ops");   mp_json_begin_object(&j); ... mp_json_end(&j);
 *   mp_json_end(&j);
 *   mp_json_finish(&j);                     // final newline; -1 if misused
 *
 * Misuse (a value where a key is due, too deep, unbalanced end) is recorded,
 * not fatal: mp_json_finish() reports it so a caller can refuse the output.
 */
#ifndef MP_JSON_H
#define MP_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define MP_JSON_MAX_DEPTH 32

typedef struct mp_json {
    FILE *f;
    int indent;                         /* spaces per level; 0 = compact, one line */
    int depth;
    bool in_object[MP_JSON_MAX_DEPTH];  /* per open level: object (true) or array */
    int count[MP_JSON_MAX_DEPTH];       /* members written so far at that level */
    int inline_from;                    /* depth of the outermost inline array, 0 = none */
    bool key_pending;                   /* a key was written, its value is due */
    bool done;                          /* the top-level value is complete */
    bool bad;                           /* misuse seen */
} mp_json;

void mp_json_init(mp_json *j, FILE *f, int indent);
void mp_json_begin_object(mp_json *j);
void mp_json_begin_array(mp_json *j);
/* An array kept on one line even when indenting (shapes, short lists). */
void mp_json_begin_inline_array(mp_json *j);
void mp_json_end(mp_json *j);                      /* closes the innermost object or array */
void mp_json_key(mp_json *j, const char *key);     /* inside an object, before each value */
void mp_json_str(mp_json *j, const char *s);       /* NULL writes null */
void mp_json_strn(mp_json *j, const char *s, size_t n);
void mp_json_int(mp_json *j, int64_t v);
void mp_json_num(mp_json *j, double v);            /* NaN and infinities write null */
void mp_json_bool(mp_json *j, bool v);
void mp_json_null(mp_json *j);
/* Ends the document with a newline; 0, or -1 if it was misused or unbalanced. */
int mp_json_finish(mp_json *j);

/* Writes s as a JSON string literal (quotes included) to f: escapes '"', '\\'
 * and control characters; invalid UTF-8 bytes become U+FFFD so the output is
 * always valid UTF-8. */
void mp_json_write_string(FILE *f, const char *s, size_t n);

#endif
