/* main.c - `memplan`: dispatches to the subcommand named by argv[1].
 *
 * A subcommand is one row of the table below; `memplan MODEL.onnx ...` with no
 * subcommand is kept for the memory analysis. Exit status: 0 success, 2 usage
 * or model error (one line on stderr, nothing on stdout). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const mp_cli_cmd commands[] = {
    {"inspect", mp_cmd_inspect, "what a model holds: ops, parameters, buffers, inputs, outputs, largest tensors"},
    {"memory", mp_cmd_memory, "memory of the training step: breakdown at the peak and in total, the peak, live tensors (also: memplan MODEL.onnx)"},
};
#define NCOMMANDS ((int)(sizeof commands / sizeof commands[0]))

static int print_help(void)
{
    printf("usage: memplan COMMAND MODEL.onnx [options]\n"
           "       memplan MODEL.onnx --batch N [options]   (same as memplan memory)\n"
           "       memplan MODEL.onnx --batch N --budget 24GB [options]   (fit a budget: recompute)\n"
           "       memplan --graph-json FILE --budget B|P%% [options]\n"
           "       memplan --help | --version\n\n"
           "memplan plans the memory of neural-network training statically, from the ONNX graph.\n\n"
           "commands:\n");
    for (int i = 0; i < NCOMMANDS; i++) printf("  %-10s %s\n", commands[i].name, commands[i].summary);
    printf("\n`memplan COMMAND --help` lists the options of a command (docs/cli.md).\n");
    return MP_EXIT_OK;
}

/* The bare form names a model rather than a command. */
static bool looks_like_model(const char *arg)
{
    struct stat st;
    size_t n = strlen(arg);
    return (n > 5 && !strcmp(arg + n - 5, ".onnx")) || strchr(arg, '/') || stat(arg, &st) == 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        mp_cli_error("no command given (see memplan --help)");
        return MP_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        if (argc > 2 && !strcmp(cmd, "help")) {
            for (int i = 0; i < NCOMMANDS; i++)
                if (!strcmp(argv[2], commands[i].name)) return commands[i].run(2, (char *[]){argv[2], "--help", NULL});
            mp_cli_error("unknown command '%s' (see memplan --help)", argv[2]);
            return MP_EXIT_USAGE;
        }
        return print_help();
    }
    if (!strcmp(cmd, "--version")) {
        printf("memplan %s\n", MEMPLAN_VERSION);
        return MP_EXIT_OK;
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    for (int i = 1; i < argc; i++) /* `memplan --graph-json FILE --budget B`: a graph, no model, is planned */
        if (!strncmp(argv[i], "--graph-json", 12) && (argv[i][12] == 0 || argv[i][12] == '=')) {
            char *saved = argv[0];
            argv[0] = "memory";
            int rc = mp_cmd_memory(argc, argv);
            argv[0] = saved;
            return rc;
        }
    if (cmd[0] == '-') {
        mp_cli_error("unknown option '%s' (see memplan --help)", cmd);
        return MP_EXIT_USAGE;
    }
    if (looks_like_model(cmd)) { /* the bare form is `memplan memory MODEL.onnx ...` */
        char *saved = argv[0];
        argv[0] = "memory";
        int rc = mp_cmd_memory(argc, argv);
        argv[0] = saved;
        return rc;
    }
    mp_cli_error("unknown command '%s' (see memplan --help)", cmd);
    return MP_EXIT_USAGE;
}
