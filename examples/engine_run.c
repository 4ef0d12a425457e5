/* examples/engine_run.c - load an ONNX model, say what its memory costs
 * before anything runs (planned at load: weights once, then per execution
 * context its arena, bindings and workspace), run it on a simple input and
 * print the start of each output.
 *
 *   cc engine_run.c $(pkg-config --cflags --libs vramkit-engine) -o engine_run
 *   ./engine_run MODEL.onnx [cpu|cuda] [BATCH]
 *
 * Float inputs get a ramp of values in [0, 1), integer ones zeros: a real
 * program copies its frames in with vram_exec_set_input. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vramkit.h>

static int failed(const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %s\n", what, vram_err_name(rc), vram_last_error());
    return 1;
}

static void print_desc(const char *role, const vram_tensor_desc *d)
{
    printf("%-6s %-20s %-7s [", role, d->name, vram_dtype_name(d->dtype));
    for (int i = 0; i < d->rank; i++)
        printf("%s%lld", i ? ", " : "", (long long)d->dims[i]);
    printf("]\n");
}

static size_t elements(const vram_tensor_desc *d)
{
    size_t n = 1;
    for (int i = 0; i < d->rank; i++)
        n *= (size_t)d->dims[i];
    return n;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s MODEL.onnx [cpu|cuda] [BATCH]\n", argv[0]);
        return 2;
    }
    vram_engine_opts opts;
    vram_engine_opts_init(&opts);
    if (argc > 2)
        opts.executor = argv[2];
    if (argc > 3)
        opts.batch = strtoll(argv[3], NULL, 10);

    vram_engine *engine;
    int rc = vram_engine_load(argv[1], &opts, &engine);
    if (rc)
        return failed("vram_engine_load", rc);

    vram_engine_info info;
    vram_engine_memory mem;
    if ((rc = vram_engine_info_get(engine, &info)) || (rc = vram_engine_memory_get(engine, &mem)))
        return failed("engine info", rc);
    printf("model  %s: %u nodes, %u steps, batch %lld%s\n", argv[1], info.nodes, info.steps,
           (long long)info.batch, info.batch_symbolic ? "" : " (fixed by the model)");
    printf("memory weights %llu B once (%llu B of them packed for the kernels); per context: "
           "activations %llu B (lower bound %llu B), bindings %llu B, workspace %llu B = %llu B\n",
           (unsigned long long)mem.weights_bytes, (unsigned long long)mem.packed_weights_bytes,
           (unsigned long long)mem.activations_bytes,
           (unsigned long long)mem.activations_lower_bound_bytes,
           (unsigned long long)mem.io_bytes, (unsigned long long)mem.workspace_bytes,
           (unsigned long long)mem.exec_bytes);

    vram_exec *exec;
    if ((rc = vram_exec_create(engine, &exec))) {
        vram_engine_destroy(engine);
        return failed("vram_exec_create", rc);
    }
    for (size_t i = 0; i < vram_engine_input_count(engine) && !rc; i++) {
        vram_tensor_desc d;
        if ((rc = vram_exec_input_desc(exec, i, &d)))
            break;
        print_desc("input", &d);
        size_t n = elements(&d), bytes = n * vram_dtype_size(d.dtype);
        unsigned char *data = calloc(bytes ? bytes : 1, 1);
        if (!data) {
            rc = VRAM_EHOSTMEM;
            break;
        }
        if (d.dtype == VRAM_DTYPE_FLOAT)
            for (size_t k = 0; k < n; k++)
                ((float *)data)[k] = (float)(k % 1000) / 1000.0f;
        rc = vram_exec_set_input(exec, i, data, bytes);
        free(data);
    }
    double t0 = now_ms();
    if (!rc)
        rc = vram_exec_run(exec);
    double t1 = now_ms();
    if (rc) {
        failed("run", rc);
        vram_exec_destroy(exec);
        vram_engine_destroy(engine);
        return 1;
    }
    printf("run    %.3f ms\n", t1 - t0);
    for (size_t i = 0; i < vram_engine_output_count(engine) && !rc; i++) {
        vram_tensor_desc d;
        if ((rc = vram_exec_output_desc(exec, i, &d)))
            break;
        print_desc("output", &d);
        size_t n = elements(&d), bytes = n * vram_dtype_size(d.dtype);
        void *data = malloc(bytes ? bytes : 1);
        if (!data) {
            rc = VRAM_EHOSTMEM;
            break;
        }
        if (!(rc = vram_exec_read_output(exec, i, data, bytes)) && d.dtype == VRAM_DTYPE_FLOAT) {
            printf("       ");
            for (size_t k = 0; k < n && k < 6; k++)
                printf(" %.5f", ((float *)data)[k]);
            printf("%s\n", n > 6 ? " ..." : "");
        }
        free(data);
    }
    if (rc)
        failed("outputs", rc);
    int rc2 = vram_exec_destroy(exec);
    int rc3 = vram_engine_destroy(engine);
    if (!rc && (rc2 || rc3))
        return failed("destroy", rc2 ? rc2 : rc3);
    return rc ? 1 : 0;
}
