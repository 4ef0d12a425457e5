/* tools/vramkit/cli.h - what the command files of the vramkit CLI share:
 * the command table's signature and small argument helpers. */
#ifndef VRAMKIT_CLI_H
#define VRAMKIT_CLI_H

#include <stdint.h>

#include "common/tool_util.h"
#include "ctxcost/ctxcost.h"
#include "replay/replay.h"
#include "vramkit.h"

/* Each command: argv[0] is the command's name. Returns the exit status. */
int cmd_replay(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_ctxcost(int argc, char **argv);
int cmd_model(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_soak(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
/* `model sweep`, dispatched by cmd_model (argv[1] is "sweep"). */
int cmd_model_sweep(int argc, char **argv);

/* Print "vramkit CMD: message" to stderr; returns 2 (usage) for chaining. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Print "vramkit CMD: <vram_last_error()>" for a failed library call; returns 1. */
int cli_lib_error(const char *cmd, int rc);

/* The value of an option "--name VALUE" or "--name=VALUE" at argv[*i];
 * advances *i past it. NULL (after printing a usage error) if missing. */
const char *cli_value(const char *cmd, int argc, char **argv, int *i, const char *name);

/* A pool made without configured listeners (no trace of a replay's many
 * passes) still gets the OOM watch VRAM_OOM_DIR asks for. 0 or the watch's
 * error. */
typedef struct vram_pool vram_pool;
int cli_watch_configured(vram_pool *pool);

/* Whether `name` names a GPU backend type (cuda, cuda_async, vmm). */
int cli_backend_is_gpu(const char *name);

/* Does argv[i] name option `name` (exactly, or as "--name=...")? */
int cli_is(const char *arg, const char *name);

#endif
