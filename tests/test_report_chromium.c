/* test_report_chromium.c - the HTML report (`memplan --report`) opened in
 * headless Chromium: it renders without script errors (the page counts them
 * in #viz-status, and marks it ready when its script has run), the key
 * elements exist in the live DOM, the decision table was sorted by the page
 * script, and a screenshot is saved in the build directory. Skips with a
 * message when /usr/bin/chromium is absent (Debian: apt-get install chromium).
 * Every browser run is bounded (CHROMIUM_TIMEOUT seconds), then killed. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run_memplan.h" /* defines: RUN, run_result, run_free, slurp */

#define MODEL(f) MEMPLAN_SOURCE "/models/" f
#define CHROMIUM "/usr/bin/chromium"
#define CHROMIUM_TIMEOUT 60

/* Runs argv with stdout to out_path (stderr discarded) in its own process
 * group; kills the group after `timeout` seconds. The exit status, or -1
 * when it was killed or did not exit. */
static int run_bounded(char *const argv[], const char *out_path, int timeout)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setpgid(0, 0);
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open("/dev/null", O_WRONLY);
        if (fo < 0 || fe < 0) _exit(127);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    setpgid(pid, pid);
    struct timespec tick = {0, 50 * 1000 * 1000};
    for (int waited = 0; waited < timeout * 20; waited++) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            kill(-pid, SIGKILL); /* renderer or GPU helpers left behind */
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        nanosleep(&tick, NULL);
    }
    kill(-pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fprintf(stderr, "test_report_chromium: %s ran past %d s, killed\n", argv[0], timeout);
    return -1;
}

/* A fresh profile directory per run (removed after, best effort). */
static int chromium(const char *what, const char *url, const char *out_path)
{
    char profile[] = "/tmp/test_report_chromium_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(profile));
    char user_dir[128];
    snprintf(user_dir, sizeof user_dir, "--user-data-dir=%s", profile);
    char *argv[] = {CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", user_dir, (char *)what,
                    "--window-size=1280,2000", (char *)url, NULL};
    int rc = run_bounded(argv, out_path, CHROMIUM_TIMEOUT);
    char *rm[] = {"/bin/rm", "-rf", profile, NULL};
    run_bounded(rm, "/dev/null", 30);
    return rc;
}

/* The build directory: where MEMPLAN_BIN lives. */
static void build_path(char *buf, size_t n, const char *name)
{
    char bin[1024];
    snprintf(bin, sizeof bin, "%s", MEMPLAN_BIN);
    snprintf(buf, n, "%s/%s", dirname(bin), name);
}

/* The value of attribute `attr` in the tag that holds `id` (NULL when absent). */
static char *attr_of(const char *dom, const char *id, const char *attr, char *buf, size_t n)
{
    const char *tag = strstr(dom, id);
    if (!tag) return NULL;
    const char *end = strchr(tag, '>');
    char key[64];
    snprintf(key, sizeof key, "%s=\"", attr);
    const char *a = strstr(tag, key);
    if (!a || !end || a > end) return NULL;
    a += strlen(key);
    size_t len = strcspn(a, "\"");
    if (len >= n) len = n - 1;
    memcpy(buf, a, len);
    buf[len] = 0;
    return buf;
}

static void check_report(const char *model, const char *const *extra, const char *shot_name)
{
    char report[256], url[300], dom_path[300], shot[1024], shot_arg[1100];
    snprintf(report, sizeof report, "/tmp/test_report_chromium_%d_%s.html", (int)getpid(), shot_name);
    const char *args[24] = {model};
    int n = 1;
    for (; extra[n - 1]; n++) args[n] = extra[n - 1];
    args[n++] = "--report";
    args[n++] = report;
    args[n] = NULL;
    run_result r = run_args(args);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, report)); /* the path is printed */
    run_free(&r);

    snprintf(url, sizeof url, "file://%s", report);
    snprintf(dom_path, sizeof dom_path, "%s.dom", report);
    ck_assert_msg(chromium("--dump-dom", url, dom_path) == 0, "chromium --dump-dom failed on %s", report);
    size_t len;
    char *dom = slurp(dom_path, &len);
    ck_assert_ptr_nonnull(dom);
    ck_assert_int_gt(len, 1000);
    char v[256];
    ck_assert_msg(attr_of(dom, "id=\"viz-status\"", "data-ready", v, sizeof v) && !strcmp(v, "yes"),
                  "the page script did not finish");
    ck_assert_msg(attr_of(dom, "id=\"viz-status\"", "data-errors", v, sizeof v) && !strcmp(v, "0"),
                  "script errors: %s", v);
    static const char *const ids[] = {"<table id=\"summary\"", "<table id=\"breakdown\"", "<div id=\"timeline\"",
                                      "id=\"timeline-svg\"", "<div id=\"graph\"", "<table id=\"decisions\"",
                                      "id=\"tl-cat-activations\"", "id=\"peak\""};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) ck_assert_msg(strstr(dom, ids[i]), "no %s in the DOM", ids[i]);
    /* the script sorted the tensors by size: the header says so, the first row is the largest */
    ck_assert_ptr_nonnull(strstr(dom, "data-dir=\"desc\">bytes</th>"));
    const char *body = strstr(strstr(dom, "<table id=\"decisions\""), "<tbody>");
    ck_assert_ptr_nonnull(body);
    long long first = -1, max = -1;
    for (const char *p = body; (p = strstr(p, "<tr><td>")); p++) {
        const char *c = strstr(p, "<td class=\"n\" data-v=\"");
        ck_assert_ptr_nonnull(c);
        long long b = strtoll(c + 22, NULL, 10);
        if (first < 0) first = b;
        if (b > max) max = b;
    }
    ck_assert_int_gt(first, 0);
    ck_assert_int_eq(first, max);
    free(dom);
    unlink(dom_path);

    build_path(shot, sizeof shot, shot_name);
    snprintf(shot_arg, sizeof shot_arg, "--screenshot=%s", shot);
    unlink(shot);
    ck_assert_msg(chromium(shot_arg, url, "/dev/null") == 0, "chromium --screenshot failed");
    char *png = slurp(shot, &len);
    ck_assert_msg(png, "no screenshot at %s", shot);
    ck_assert(len > 10000 && !memcmp(png, "\x89PNG\r\n\x1a\n", 8));
    free(png);
    fprintf(stderr, "test_report_chromium: screenshot %s\n", shot);
    unlink(report);
}

START_TEST(test_report_renders)
{
    if (access(CHROMIUM, X_OK)) {
        fprintf(stderr, "test_report_chromium: SKIP: %s not found (Debian: apt-get install chromium)\n", CHROMIUM);
        return;
    }
    static const char *const mlp[] = {"--batch", "4", NULL};
    check_report(MODEL("mlp.onnx"), mlp, "viz_report_mlp.png");
    static const char *const gpt[] = {"--batch", "2", "--dim", "sequence=16", "--dot-level", "stage", NULL};
    check_report(MODEL("gpt_decoder.onnx"), gpt, "viz_report_gpt_decoder.png");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("report_chromium");
    TCase *t = tcase_create("chromium");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_report_renders);
    suite_add_tcase(s, t);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
