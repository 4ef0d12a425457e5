/* tools/vramkit/main.c - the vramkit command line: dispatch to one file per
 * command. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "vramkit.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"replay", cmd_replay, "replay allocation traces through a pool and compare with malloc"},
    {"config", cmd_config, "print every option, its value and where it came from"},
    {"ctxcost", cmd_ctxcost, "measure what CUDA contexts cost on this GPU, and what sharing saves"},
    {"soak", cmd_soak, "run a workload many times and say whether its memory grows (leak verdict)"},
    {"model", cmd_model, "ONNX models: what they are and cost (info), and running them (run)"},
    {"report", cmd_report, "snapshots, sample series and OOM reports as one HTML page"},
    {"metrics", cmd_metrics, "replayed pools as Prometheus metrics: printed once or served over HTTP"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: vramkit COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nvramkit COMMAND --help describes a command. Options are read from VRAM_* "
               "environment variables (vramkit config lists them).\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("vramkit 0.1.0\n");
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "vramkit: unknown command \"%s\"\n\n", argv[1]);
    usage(stderr);
    return 2;
}
