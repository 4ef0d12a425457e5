/* tools/vramkit/cli.h - what the command files of the vramkit CLI share:
 * the commands' entry points, the option tables (args.h) and printing a
 * library error. Every command exits 0 when it did what was asked, 1 when
 * it failed or its verdict is bad, 2 for a usage error. */
#ifndef VRAMKIT_CLI_H
#define VRAMKIT_CLI_H

#include <stdint.h>

#include "args.h"
#include "common/tool_util.h"
#include "ctxcost/ctxcost.h"
#include "replay/replay.h"
#include "vramkit.h"

/* Each command: argv[0] is the command's name. Returns the exit status. */
int cmd_run(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_ctxcost(int argc, char **argv);
int cmd_model(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_soak(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_trace(int argc, char **argv);
/* `model sweep`, dispatched by cmd_model (argv[0] is "sweep"). */
int cmd_model_sweep(int argc, char **argv);

/* Print "vramkit CMD: <vram_last_error()>" for a failed library call;
 * returns 1. */
int cli_lib_error(const char *cmd, int rc);


/* Whether `name` names a GPU backend type (cuda, cuda_async, vmm). */
int cli_backend_is_gpu(const char *name);

/* The choices of --backend and --policy, for the option tables. */
#define CLI_BACKENDS "sim|host|cuda|cuda_async|vmm"
#define CLI_POLICIES "vmm|segments"

/* Print a cJSON tree on stdout (one line) and delete it: 0, or 1 when it
 * could not be printed. */
int cli_print_json(cJSON *root);

#endif
