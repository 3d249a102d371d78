/* run_memplan.h - runs the built memplan binary (MEMPLAN_BIN) in a test and
 * captures its exit status, stdout and stderr:
 *
 *   run_result r = RUN("inspect", path, "--json");
 *   ck_assert_int_eq(r.status, 0);
 *   run_free(&r);
 *
 * Included by the Check suites that test the command line. */
#ifndef MP_RUN_MEMPLAN_H
#define MP_RUN_MEMPLAN_H

#include <check.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct run_result {
    int status;   /* exit status, or -1 if it did not exit normally */
    char *out, *err;
    size_t outlen, errlen;
} run_result;

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += k;
        if (n == cap) buf = realloc(buf, (cap *= 2) + 1);
    }
    fclose(f);
    if (buf) buf[n] = 0;
    if (len) *len = n;
    return buf;
}

/* Runs MEMPLAN_BIN with args (NULL-terminated), stdout and stderr to files. */
static run_result run_args(const char *const *args)
{
    const char *argv[64] = {MEMPLAN_BIN};
    int n = 1;
    while (args[n - 1] && n < 63) argv[n] = args[n - 1], n++;
    argv[n] = NULL;
    char outp[] = "/tmp/memplan_test_outXXXXXX", errp[] = "/tmp/memplan_test_errXXXXXX";
    int fo = mkstemp(outp), fe = mkstemp(errp);
    ck_assert(fo >= 0 && fe >= 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fo, 1);
    posix_spawn_file_actions_adddup2(&fa, fe, 2);
    pid_t pid;
    ck_assert_int_eq(posix_spawn(&pid, MEMPLAN_BIN, &fa, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    close(fo);
    close(fe);
    run_result r = {WIFEXITED(st) ? WEXITSTATUS(st) : -1, NULL, NULL, 0, 0};
    r.out = slurp(outp, &r.outlen);
    r.err = slurp(errp, &r.errlen);
    unlink(outp);
    unlink(errp);
    ck_assert(r.out && r.err);
    return r;
}
#define RUN(...) run_args((const char *const[]){__VA_ARGS__, NULL})

static void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

#endif
