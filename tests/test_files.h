/* test_files.h - whole-file reads for the suites that walk ../shared (read_pb: include frontend/onnx.h first). */
#ifndef MP_TEST_FILES_H
#define MP_TEST_FILES_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* The file's bytes (malloc'd, freed by the caller), or NULL. */
static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

#ifdef MP_ONNX_H
/* A TensorProto file (a backend case's input_K.pb / output_K.pb), or NULL with err. */
static inline mp_tensor *read_pb(mp_arena *a, const char *path, mp_err *err)
{
    size_t n;
    unsigned char *buf = read_file(path, &n);
    if (!buf) {
        mp_fail(err, "cannot read %s", path);
        return NULL;
    }
    mp_tensor *t = mp_onnx_read_tensor(a, buf, n, true, err);
    free(buf);
    return t;
}
#endif

#endif
