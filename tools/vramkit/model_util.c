/* tools/vramkit/model_util.c - helpers of the `vramkit model` commands (see
 * model_util.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/tool_util.h"
#include "cli.h"
#include "model_util.h"
#include "vramkit.h"

void model_opts_init(model_opts *o)
{
    vram_engine_opts eo;
    vram_engine_opts_init(&eo); /* a malformed variable keeps its default */
    *o = (model_opts){.backend = eo.executor, .batch = 1, .workspace = eo.workspace_limit,
                      .tf32 = eo.tf32, .graph = eo.graphs,
                      .threads = eo.threads > 0 ? (uint64_t)eo.threads : 1,
                      .kernels = eo.cpu_reference ? "reference" : "fast"};
}

void model_note_batch(const char *cmd, const char *model, const model_opts *o,
                      const vram_engine *e)
{
    vram_engine_info in;
    if (!o->batch_given || vram_engine_info_get(e, &in) || in.batch_symbolic ||
        (uint64_t)in.batch == o->batch)
        return;
    fprintf(stderr, "vramkit %s: %s has a fixed batch of %lld (its inputs say so): --batch %llu "
                    "does not change it\n",
            cmd, model, (long long)in.batch, (unsigned long long)o->batch);
}

int model_check_opts(const char *cmd, const model_opts *o)
{
    if (strcmp(o->backend, "cuda") && (o->tf32 || o->graph))
        return cli_usage_error(cmd, "%s is for the cuda backend (this run is on %s)",
                               o->tf32 ? "--tf32" : "--graph", o->backend);
    if (strcmp(o->backend, "cpu") && o->threads_given)
        return cli_usage_error(cmd, "--threads is for the cpu backend (this run is on %s)",
                               o->backend);
    return 0;
}

int model_load(const char *path, const model_opts *mo, vram_engine **e)
{
    vram_engine_opts o;
    vram_engine_opts_init(&o);
    o.executor = mo->backend;
    o.batch = (int64_t)mo->batch;
    o.workspace_limit = mo->workspace;
    o.tf32 = mo->tf32;
    o.graphs = mo->graph;
    o.threads = (int)mo->threads;
    o.cpu_reference = !strcmp(mo->kernels, "reference");
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
    cJSON_AddNumberToObject(mm, "packed_weights_bytes", (double)m->packed_weights_bytes);
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
