/* tools/vramkit/main.c - the vramkit command line: dispatch to one file per
 * command, the top-level help and the version. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"run", cmd_run, "run video streams through a model, batched across streams, in one budget"},
    {"replay", cmd_replay, "replay allocation traces through a pool and compare with malloc"},
    {"config", cmd_config, "print every option, its value and where it came from"},
    {"ctxcost", cmd_ctxcost, "measure what CUDA contexts cost on this GPU, and what sharing saves"},
    {"soak", cmd_soak, "run a workload many times and say whether its memory grows (leak verdict)"},
    {"model", cmd_model, "ONNX models: what they are and cost (info), running them (run), "
                         "choosing a workspace (sweep)"},
    {"report", cmd_report, "snapshots, sample series and OOM reports as one HTML page"},
    {"metrics", cmd_metrics, "replayed pools as Prometheus metrics: printed once or served over HTTP"},
    {"trace", cmd_trace, "run a program with vramkit loaded into it: its device memory traced, "
                         "limited or pooled"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: vramkit COMMAND [ARGS...]\n       vramkit --version [--json]\n\n"
               "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "  %-10s %s\n", "help", "this list");
    fprintf(f, "\nvramkit COMMAND --help describes a command. Every command takes --json. Options "
               "are read\nfrom VRAM_* environment variables (vramkit config lists them). Exit "
               "status: 0 done,\n1 failed or a bad verdict, 2 a usage error. man vramkit has "
               "it all.\n");
}

static int version(int argc, char **argv)
{
    int json = argc > 2 && !strcmp(argv[2], "--json");
    if (argc > 2 + json) {
        fprintf(stderr, "vramkit: --version takes only --json, not \"%s\"\n", argv[2 + json]);
        return 2;
    }
    if (json) {
        printf("{\"version\":\"%s\",\"version_number\":%u,\"headers\":\"%s\"}\n",
               vram_version_string(), vram_version(), VRAM_VERSION_STRING);
    } else {
        printf("vramkit %s", vram_version_string());
        if (vram_version() != VRAM_VERSION)
            printf(" (built against the headers of %s)", VRAM_VERSION_STRING);
        printf("\n");
    }
    return fflush(stdout) ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version"))
        return version(argc, argv);
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    const char *names[N_COMMANDS + 3];
    for (size_t i = 0; i < N_COMMANDS; i++)
        names[i] = commands[i].name;
    names[N_COMMANDS] = "help";
    names[N_COMMANDS + 1] = "--help";
    names[N_COMMANDS + 2] = "--version";
    const char *close = cli_closest(cmd, names, (int)N_COMMANDS + 3);
    if (close)
        fprintf(stderr, "vramkit: unknown command \"%s\" (did you mean %s?); vramkit --help "
                        "lists the commands\n", cmd, close);
    else
        fprintf(stderr, "vramkit: unknown command \"%s\"; vramkit --help lists the commands\n",
                cmd);
    return 2;
}
