/* tools/common/tool_util.h - what the command line's files share besides
 * the public API: a monotonic clock, a median, the machine's description,
 * checked host allocation,
 * keeping the last error across clean-up, and printing a cJSON tree through
 * a vram_write_fn. */
#ifndef VRAM_TOOLS_TOOL_UTIL_H
#define VRAM_TOOLS_TOOL_UTIL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "vramkit.h"

#define TOOL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define TOOL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Monotonic nanoseconds. */
uint64_t tool_now_ns(void);

/* The median of n values (sorts v in place); 0 for n = 0. */
double tool_median_u64(uint64_t *v, unsigned n);

/* The machine in one line for a benchmark's page: the CPU model (from
 * /proc/cpuinfo), its online cores and the kernel, e.g. "AMD EPYC 7B13,
 * 2 cores, Linux 6.1.0". */
void tool_machine(char *buf, size_t cap);

/* calloc that records VRAM_EHOSTMEM as the last error when it fails. */
void *tool_calloc(size_t n, size_t size);

/* This thread's last error, kept across clean-up calls that set their own:
 * save, clean up, then `return tool_error_restore(&saved, rc)`. */
typedef struct tool_saved_error {
    char msg[1024];
} tool_saved_error;
void tool_error_save(tool_saved_error *s);
int tool_error_restore(const tool_saved_error *s, int code);

/* A list of device indices "0,1,3" (each 0..max_index, each once, at most
 * cap) into gpus and *n: 0, or VRAM_EINVAL with the sentence. */
int tool_parse_gpus(const char *list, int max_index, int *gpus, size_t cap, size_t *n);

/* Print `root` unformatted plus a newline through `write`, then delete it.
 * NULL (building the tree ran out of memory) gives VRAM_EHOSTMEM. */
int tool_emit_json(cJSON *root, vram_write_fn write, void *ctx);

#endif
