/* tools/vramkit/cmd_model_sweep.c - `vramkit model sweep MODEL --workspace
 * LIST`: for each workspace limit, load the model under it, run a context on
 * the same seeded inputs and print what the context costs and how long a run
 * takes, so that a workspace is chosen from measurement instead of guessed.
 * Every limit must give the same outputs as the first (within 1e-4 relative
 * L2); the column says how close they are. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tool_util.h"
#include "cli.h"
#include "model_util.h"
#include "vramkit.h"

#define MAX_LIMITS 16

typedef struct outputs {
    float **data;
    size_t *n;
    size_t count;
} outputs;

static void outputs_free(outputs *o)
{
    for (size_t i = 0; i < o->count; i++)
        free(o->data[i]);
    free(o->data);
    free(o->n);
    memset(o, 0, sizeof *o);
}

/* Keep the float outputs of a run (others are compared exactly as bytes
 * would be: they are skipped here, the run itself is what is timed). */
static int keep_outputs(vram_exec *c, const vram_engine *e, outputs *o)
{
    o->count = vram_engine_output_count(e);
    o->data = calloc(o->count, sizeof *o->data);
    o->n = calloc(o->count, sizeof *o->n);
    if (!o->data || !o->n)
        return VRAM_EHOSTMEM;
    for (size_t i = 0; i < o->count; i++) {
        vram_tensor_desc d;
        void *p;
        size_t bytes;
        vram_engine_output(e, i, &d);
        if (d.dtype != VRAM_DTYPE_FLOAT)
            continue;
        int rc = model_read_output(c, i, &p, &bytes);
        if (rc)
            return rc;
        o->data[i] = p;
        o->n[i] = bytes / sizeof(float);
    }
    return 0;
}

/* The largest relative L2 difference of b's outputs from a's. */
static double worst_diff(const outputs *a, const outputs *b)
{
    double worst = 0;
    for (size_t i = 0; i < a->count && i < b->count; i++) {
        double d = 0, n = 0;
        for (size_t k = 0; a->data[i] && k < a->n[i]; k++) {
            double x = a->data[i][k], y = b->data[i][k];
            d += (x - y) * (x - y);
            n += x * x;
        }
        double r = n > 0 ? sqrt(d / n) : sqrt(d);
        if (r > worst)
            worst = r;
    }
    return worst;
}

static const char about[] =
    "For each workspace limit (the scratch the convolutions may use per execution context;\n"
    "cpu: with none they run as direct loops; cuda: cuDNN's fastest algorithm that fits),\n"
    "loads the model under it and prints the workspace and execution context bytes and the\n"
    "latency of --runs runs (default 10) on seeded random inputs; every limit must give the\n"
    "first one's outputs within 1e-4 relative L2 (1e-2 with --tf32, whose rounding depends\n"
    "on the algorithm), else the exit status is 1. --json prints one JSON object per limit.\n";

static int parse_limits(const char *list, uint64_t *limits, int *n)
{
    char buf[512];
    if (!list[0] || strlen(list) >= sizeof buf || list[0] == ',' ||
        list[strlen(list) - 1] == ',' || strstr(list, ",,"))
        return cli_usage_error("model sweep", "--workspace \"%s\": a comma-separated list of "
                                              "sizes, e.g. 0,16M,64M,256M",
                               list);
    strcpy(buf, list);
    *n = 0;
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_LIMITS)
            return cli_usage_error("model sweep", "--workspace: at most %d sizes", MAX_LIMITS);
        if (vram_size_parse(item, &limits[*n]))
            return cli_usage_error("model sweep", "--workspace: %s", vram_last_error());
        (*n)++;
    }
    return 0;
}

static int sweep(const char *model, model_opts mo, const uint64_t *limits, int n_limits,
                 long runs, uint64_t seed, int json)
{
    outputs first = {0};
    int status = 0;
    if (!json)
        printf("%-12s %14s %14s %10s %10s %10s %12s\n", "limit", "workspace B", "exec B",
               "p50 ms", "mean ms", "min ms", "max diff");
    double *ms = calloc((size_t)runs, sizeof *ms);
    if (!ms)
        return 1;
    for (int l = 0; l < n_limits && !status; l++) {
        vram_engine *e;
        vram_exec *c = NULL;
        mo.workspace = limits[l];
        int rc = model_load(model, &mo, &e);
        if (rc)
            return free(ms), outputs_free(&first), cli_lib_error("model sweep", rc);
        if (l == 0)
            model_note_batch("model sweep", model, &mo, e);
        rc = vram_exec_create(e, &c);
        if (!rc)
            rc = model_fill_inputs(c, e, seed);
        if (!rc)
            rc = vram_exec_run(c); /* warm-up, and the outputs compared */
        outputs o = {0};
        if (!rc)
            rc = keep_outputs(c, e, l == 0 ? &first : &o);
        for (long i = 0; !rc && i < runs; i++) {
            double t = model_now_ms();
            rc = vram_exec_run(c);
            ms[i] = model_now_ms() - t;
        }
        if (rc) {
            status = cli_lib_error("model sweep", rc);
        } else {
            vram_engine_memory m;
            vram_engine_memory_get(e, &m);
            qsort(ms, (size_t)runs, sizeof *ms, model_cmp_double);
            double sum = 0;
            for (long i = 0; i < runs; i++)
                sum += ms[i];
            double diff = l == 0 ? 0.0 : worst_diff(&first, &o);
            char lim[32];
            vram_size_format(lim, sizeof lim, limits[l]);
            if (json) {
                cJSON *row = cJSON_CreateObject();
                cJSON_AddStringToObject(row, "model", model);
                cJSON_AddStringToObject(row, "executor", mo.backend);
                cJSON_AddNumberToObject(row, "workspace_limit_bytes", (double)limits[l]);
                model_memory_json(row, &m);
                cJSON *lat = cJSON_AddObjectToObject(row, "latency_ms");
                cJSON_AddNumberToObject(lat, "runs", (double)runs);
                cJSON_AddNumberToObject(lat, "p50", ms[(runs - 1) / 2]);
                cJSON_AddNumberToObject(lat, "mean", sum / (double)runs);
                cJSON_AddNumberToObject(lat, "min", ms[0]);
                cJSON_AddNumberToObject(row, "max_relative_l2_diff", diff);
                if (cli_print_json(row))
                    status = 1;
            } else {
                printf("%-12s %14llu %14llu %10.3f %10.3f %10.3f %12.3g\n", lim,
                       (unsigned long long)m.workspace_bytes, (unsigned long long)m.exec_bytes,
                       ms[(runs - 1) / 2], sum / (double)runs, ms[0], diff);
            }
            double tol = mo.tf32 ? 1e-2 : 1e-4;
            if (!(diff <= tol)) {
                fprintf(stderr, "vramkit model sweep: at a %s workspace the outputs differ from "
                                "the first limit's by %.3g relative L2\n",
                        lim, diff);
                status = 1;
            }
        }
        outputs_free(&o);
        vram_exec_destroy(c);
        vram_engine_destroy(e);
    }
    free(ms);
    outputs_free(&first);
    return status;
}

int cmd_model_sweep(int argc, char **argv)
{
    const char *list = "0,16M,64M,256M";
    uint64_t runs = 10, seed = 1;
    int json = 0;
    model_opts mo;
    model_opts_init(&mo);
    const cli_opt opts[] = {
        {"--backend", NULL, CLI_CHOICE, &mo.backend, NULL,
         "the executor: cpu or cuda (default VRAM_ENGINE_EXECUTOR)", 0, 0, "cpu|cuda"},
        {"--batch", NULL, CLI_UINT, &mo.batch, "N", "the largest batch, for a symbolic batch",
         1, 1 << 20, NULL, &mo.batch_given},
        {"--workspace", NULL, CLI_STRING, &list, "LIST",
         "the limits, comma-separated sizes (default 0,16M,64M,256M)"},
        {"--tf32", NULL, CLI_FLAG, &mo.tf32, NULL, "cuda: TF32 tensor cores"},
        {"--runs", NULL, CLI_UINT, &runs, "N", "timed runs per limit (default 10)", 1, 1e6},
        {"--seed", NULL, CLI_UINT, &seed, "S", "seed of the random inputs (default 1)"},
        {"--json", NULL, CLI_FLAG, &json, NULL, "one JSON object per limit"},
        {0},
    };
    const cli_spec spec = {"model sweep", "MODEL.onnx", about, opts, 1, 1, "model"};
    const char **args;
    int n, st = cli_parse(&spec, argc, argv, &args, &n);
    if (st)
        return st < 0 ? 0 : st;
    const char *model = args[0];
    free(args);
    mo.graph = 0;
    int rc = model_check_opts("model sweep", &mo);
    if (rc)
        return rc;
    uint64_t limits[MAX_LIMITS];
    int n_limits = 0;
    rc = parse_limits(list, limits, &n_limits);
    return rc ? rc : sweep(model, mo, limits, n_limits, (long)runs, seed, json);
}
