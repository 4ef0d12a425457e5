/* bench/replay.c - replays every trace given under every policy and prints a
 * table; with --out writes it as Markdown (with the machine, date, command and
 * commit) and a JSON Lines file beside it (same name, .jsonl).
 *
 *   bench_replay [--out FILE.md] [--runs N] [--commit SHA] TRACE... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/tool_util.h"
#include "replay/replay.h"
#include "vramkit.h"

static double mib(uint64_t b) { return (double)b / 1048576.0; }

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int main(int argc, char **argv)
{
    const char *out = NULL, *commit = "unknown";
    unsigned runs = 5;
    int first_trace = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--commit") == 0 && i + 1 < argc)
            commit = argv[++i];
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = (unsigned)atoi(argv[++i]);
        else {
            first_trace = i;
            break;
        }
    }
    if (first_trace >= argc) {
        fprintf(stderr, "usage: bench_replay [--out FILE.md] [--runs N] [--commit SHA] TRACE...\n");
        return 2;
    }
    FILE *md = NULL, *jl = NULL;
    if (out) {
        md = fopen(out, "w");
        char jpath[1024];
        snprintf(jpath, sizeof jpath, "%.*sjsonl", (int)(strlen(out) - (strlen(out) > 2 ? 2 : 0)),
                 out);
        jl = fopen(jpath, "w");
        if (!md || !jl) {
            fprintf(stderr, "bench_replay: cannot write %s or %s\n", out, jpath);
            return 1;
        }
        char machine[400], date[64];
        tool_machine(machine, sizeof machine);
        time_t now = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
        fprintf(md, "# Trace replay: vmm and segments policies against glibc malloc\n\n");
        fprintf(md, "- date: %s\n- machine: %s (no GPU: sim backend)\n- commit: %s\n", date,
                machine, commit);
        fprintf(md, "- command: `bench_replay --runs %u", runs);
        for (int i = first_trace; i < argc; i++)
            fprintf(md, " %s", argv[i]);
        fprintf(md, "` (via `make bench`)\n");
        fprintf(md, "- granularity 2 MiB; ns/op is host time per allocate or free, median of %u "
                    "timed runs, alternating with glibc malloc/free replaying the same events; "
                    "floor is the most bytes live or pending under the stream model, over peak "
                    "live (no policy can do better)\n\n",
                runs);
        fprintf(md, "| trace | policy | events | peak live MiB | peak held MiB | ratio | floor | "
                    "frag at peak | backend calls | ns/op | malloc ns/op | failed |\n");
        fprintf(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    }
    int status = 0, header_done = 0;
    for (int i = first_trace; i < argc; i++) {
        vram_trace *t;
        if (vram_trace_read(argv[i], &t)) {
            fprintf(stderr, "bench_replay: %s\n", vram_last_error());
            status = 1;
            continue;
        }
        for (int pol = 0; pol < 2; pol++) {
            vram_replay_opts o;
            vram_replay_opts_init(&o);
            o.pool.policy = pol ? VRAM_POLICY_SEGMENTS : VRAM_POLICY_VMM;
            o.timing_runs = runs;
            vram_replay_result r;
            if (vram_replay_run(t, &o, &r)) {
                fprintf(stderr, "bench_replay: %s: %s\n", argv[i], vram_last_error());
                status = 1;
                continue;
            }
            const char *pn = vram_policy_name(o.pool.policy);
            if (!header_done++)
                vram_replay_print_header(&o, vram_write_stdio, stdout, 0);
            vram_replay_row row = {argv[i], pn, &o, &r};
            vram_replay_print_row(&row, vram_write_stdio, stdout, 0);
            if (md) {
                fprintf(md, "| %s | %s | %llu | %.1f | %.1f | %.3f | %.3f | %.3f | %llu | %.1f | "
                            "%.1f | %llu |\n",
                        base_name(argv[i]), pn, (unsigned long long)r.events,
                        mib(r.peak_live_bytes), mib(r.peak_reserved_bytes), r.reserved_ratio,
                        r.floor_ratio, r.fragmentation_at_peak,
                        (unsigned long long)r.backend_calls, r.ns_per_op, r.malloc_ns_per_op,
                        (unsigned long long)r.failed_allocs);
                vram_replay_row jrow = {base_name(argv[i]), pn, &o, &r};
                vram_replay_print_row(&jrow, vram_write_stdio, jl, VRAM_PRINT_JSON);
            }
            fflush(stdout);
        }
        vram_trace_free(t);
    }
    if (md) {
        fclose(md);
        fclose(jl);
    }
    return status;
}
