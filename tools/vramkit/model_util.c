/* tools/vramkit/model_util.c - helpers of the `vramkit model` commands (see
 * model_util.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/tool_util.h"
#include "cli.h"
#include "model_util.h"
#include "vramkit.h"

void model_opts_init(model_opts *o)
{
    *o = (model_opts){.backend = "cpu", .batch = 1, .workspace = MODEL_DEFAULT_WORKSPACE};
}

int model_parse_i64(const char *cmd, const char *opt, const char *v, int64_t lo, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || !*v || x < lo)
        return cli_usage_error(cmd, "%s takes an integer >= %lld, not '%s'", opt, (long long)lo, v);
    *out = x;
    return 0;
}

int model_parse_opt(const char *cmd, int argc, char **argv, int *i, model_opts *o, int *status)
{
    const char *a = argv[*i], *v;
    *status = 0;
    if (!strcmp(a, "--tf32") || !strcmp(a, "--graph")) {
        *(!strcmp(a, "--tf32") ? &o->tf32 : &o->graph) = 1;
        return 1;
    }
    if (cli_is(a, "--backend")) {
        if (!(v = cli_value(cmd, argc, argv, i, "--backend")))
            *status = 2;
        else if (strcmp(v, "cpu") && strcmp(v, "cuda"))
            *status = cli_usage_error(cmd, "--backend takes cpu or cuda, not '%s'", v);
        else
            o->backend = v;
        return 1;
    }
    if (cli_is(a, "--batch")) {
        v = cli_value(cmd, argc, argv, i, "--batch");
        *status = v ? model_parse_i64(cmd, "--batch", v, 1, &o->batch) : 2;
        return 1;
    }
    if (cli_is(a, "--workspace")) {
        if (!(v = cli_value(cmd, argc, argv, i, "--workspace")))
            *status = 2;
        else if (vram_size_parse(v, &o->workspace) || o->workspace == MODEL_DEFAULT_WORKSPACE)
            *status = cli_usage_error(cmd, "--workspace takes a size (e.g. 0, 16M, 1G), not '%s'",
                                      v);
        return 1;
    }
    return 0;
}

int model_check_opts(const char *cmd, const model_opts *o)
{
    if (strcmp(o->backend, "cuda") && (o->tf32 || o->graph))
        return cli_usage_error(cmd, "%s is for the cuda backend (this run is on %s)",
                               o->tf32 ? "--tf32" : "--graph", o->backend);
    return 0;
}

int model_load(const char *path, const model_opts *mo, vram_engine **e)
{
    vram_engine_opts o;
    vram_engine_opts_init(&o);
    o.executor = mo->backend;
    o.batch = mo->batch;
    o.workspace_limit = mo->workspace;
    o.tf32 = mo->tf32;
    o.graphs = mo->graph;
    return vram_engine_load(path, &o, e);
}

int model_read_output(vram_exec *c, size_t i, void **data, size_t *bytes)
{
    const void *p;
    int rc = vram_exec_output(c, i, &p, bytes);
    if (rc)
        return rc;
    *data = malloc(*bytes ? *bytes : 1);
    if (!*data)
        return VRAM_EHOSTMEM;
    rc = vram_exec_read_output(c, i, *data, *bytes);
    if (rc) {
        free(*data);
        *data = NULL;
    }
    return rc;
}

int64_t model_elems(const vram_tensor_desc *d)
{
    int64_t n = 1;
    for (int i = 0; i < d->rank; i++)
        n *= d->dims[i];
    return n;
}

void model_fill_random(uint64_t seed, size_t input, int dtype, int64_t n, void *out)
{
    uint64_t x = seed + (uint64_t)(input + 1) * 0x9E3779B97F4A7C15ull;
    if (!x)
        x = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < n; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        uint64_t r = x * 0x2545F4914F6CDD1Dull;
        switch (dtype) {
        case VRAM_DTYPE_FLOAT:
            ((float *)out)[i] = (float)((double)((int64_t)(r >> 40) - 8388608) / 8388608.0);
            break;
        case VRAM_DTYPE_INT64:
            ((int64_t *)out)[i] = (int64_t)(r >> 62);
            break;
        case VRAM_DTYPE_INT32:
            ((int32_t *)out)[i] = (int32_t)(r >> 62);
            break;
        case VRAM_DTYPE_UINT8:
            ((uint8_t *)out)[i] = (uint8_t)(r >> 56);
            break;
        case VRAM_DTYPE_BOOL:
            ((uint8_t *)out)[i] = (uint8_t)(r >> 63);
            break;
        default: /* no rule for it: zeros */
            memset(out, 0, (size_t)n * vram_dtype_size(dtype));
            return;
        }
    }
}

int model_fill_inputs(vram_exec *ctx, const vram_engine *e, uint64_t seed)
{
    for (size_t i = 0; i < vram_engine_input_count(e); i++) {
        vram_tensor_desc d;
        vram_engine_input(e, i, &d);
        int64_t n = model_elems(&d);
        size_t bytes = (size_t)n * vram_dtype_size(d.dtype);
        void *buf = malloc(bytes ? bytes : 1);
        if (!buf)
            return VRAM_EHOSTMEM;
        model_fill_random(seed, i, d.dtype, n, buf);
        int rc = vram_exec_set_input(ctx, i, buf, bytes);
        free(buf);
        if (rc)
            return rc;
    }
    return 0;
}

void model_memory_json(cJSON *parent, const vram_engine_memory *m)
{
    cJSON *mm = cJSON_AddObjectToObject(parent, "memory");
    if (!mm)
        return;
    double ratio = m->activations_lower_bound_bytes ? (double)m->activations_bytes /
                                                          (double)m->activations_lower_bound_bytes
                                                    : 1.0;
    cJSON_AddNumberToObject(mm, "weights_bytes", (double)m->weights_bytes);
    cJSON_AddNumberToObject(mm, "activations_bytes", (double)m->activations_bytes);
    cJSON_AddNumberToObject(mm, "activations_lower_bound_bytes",
                            (double)m->activations_lower_bound_bytes);
    cJSON_AddNumberToObject(mm, "activations_over_lower_bound", ratio);
    cJSON_AddNumberToObject(mm, "io_bytes", (double)m->io_bytes);
    cJSON_AddNumberToObject(mm, "workspace_bytes", (double)m->workspace_bytes);
    cJSON_AddNumberToObject(mm, "exec_bytes", (double)m->exec_bytes);
}

double model_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int model_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
