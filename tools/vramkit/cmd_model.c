/* tools/vramkit/cmd_model.c - `vramkit model info|run`: what a model is and
 * what its memory costs (inputs, outputs, operators, the four memory
 * categories, the arena against its lower bound), and running it on NumPy
 * .npy inputs with outputs written as .npy files, optionally timed. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "model_util.h"
#include "vramkit.h"
#include "vramkit/engine.h"

static const char about_model[] =
    "Subcommands (each takes --help):\n"
    "  info MODEL.onnx   inputs, outputs, operators, and memory: weights (once per engine),\n"
    "                    activations (one execution context's arena, against its lower\n"
    "                    bound), input/output bindings and workspace\n"
    "  run MODEL.onnx    run it on .npy inputs (or seeded random ones), write the outputs\n"
    "                    as .npy files, optionally timed\n"
    "  sweep MODEL.onnx  for each workspace limit, the workspace, what an execution context\n"
    "                    costs and how long a run takes\n";

static const char about_info[] =
    "Loads the model and prints its inputs and outputs at the batch, its operators, and its\n"
    "memory in four categories - weights (once per engine), activations (one execution\n"
    "context's arena, against the most bytes live at any step, its lower bound),\n"
    "input/output bindings and workspace - with what one more execution context costs.\n"
    "--batch sets the largest batch of inputs whose first dimension is symbolic; a model\n"
    "whose batch is fixed keeps it (and says so).\n";

static const char about_run[] =
    "Runs the model once on the inputs given as .npy files (missing inputs are filled with\n"
    "seeded random values, see tests/onnx/README.md) and writes each output to\n"
    "DIR/<output name>.npy (characters other than letters, digits, '.', '-' and '_' become\n"
    "'_'; DIR defaults to the current directory). --bench N runs N more times and prints\n"
    "latency percentiles (the outputs written are the last run's). --backend cuda runs on\n"
    "the GPU (cuDNN convolutions, cuBLAS matrix products) in exact FP32, or with TF32\n"
    "tensor cores with --tf32; --graph captures the run into a CUDA graph the first time\n"
    "and replays it. --json prints one JSON object (memory, outputs, first run and latency)\n"
    "and nothing else on stdout.\n";

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void shape_text(const vram_tensor_desc *d, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < d->rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)d->dims[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

static cJSON *tensors_json(const vram_engine *e, int outputs)
{
    cJSON *arr = cJSON_CreateArray();
    size_t n = outputs ? vram_engine_output_count(e) : vram_engine_input_count(e);
    for (size_t i = 0; arr && i < n; i++) {
        vram_tensor_desc d;
        (outputs ? vram_engine_output : vram_engine_input)(e, i, &d);
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", d.name);
        cJSON_AddStringToObject(t, "dtype", vram_dtype_name(d.dtype));
        cJSON *s = cJSON_AddArrayToObject(t, "shape");
        for (int k = 0; k < d.rank; k++)
            cJSON_AddItemToArray(s, cJSON_CreateNumber((double)d.dims[k]));
        cJSON_AddItemToArray(arr, t);
    }
    return arr;
}

static int info(const char *model, const model_opts *mo, int json)
{
    vram_engine *e;
    int rc = model_load(model, mo, &e);
    if (rc)
        return cli_lib_error("model info", rc);
    model_note_batch("model info", model, mo, e);
    vram_engine_info in;
    vram_engine_memory m;
    vram_engine_info_get(e, &in);
    vram_engine_memory_get(e, &m);
    size_t n_ops;
    vram_engine_op_counts(e, NULL, 0, &n_ops);
    vram_op_count *ops = calloc(n_ops + 1, sizeof *ops);
    if (!ops) {
        vram_engine_destroy(e);
        return 1;
    }
    vram_engine_op_counts(e, ops, n_ops, &n_ops);
    double ratio = m.activations_lower_bound_bytes
                       ? (double)m.activations_bytes / (double)m.activations_lower_bound_bytes
                       : 1.0;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "model", model);
        cJSON_AddNumberToObject(o, "opset", (double)in.opset);
        cJSON_AddStringToObject(o, "producer", in.producer);
        cJSON_AddNumberToObject(o, "batch", (double)in.batch);
        cJSON_AddBoolToObject(o, "batch_symbolic", in.batch_symbolic);
        cJSON_AddItemToObject(o, "inputs", tensors_json(e, 0));
        cJSON_AddItemToObject(o, "outputs", tensors_json(e, 1));
        cJSON *oc = cJSON_AddObjectToObject(o, "operators");
        for (size_t i = 0; i < n_ops; i++)
            cJSON_AddNumberToObject(oc, ops[i].op, ops[i].count);
        cJSON_AddNumberToObject(o, "nodes", in.nodes);
        cJSON_AddNumberToObject(o, "folded_nodes", in.folded_nodes);
        cJSON_AddNumberToObject(o, "fused_batchnorms", in.fused_batchnorms);
        cJSON_AddNumberToObject(o, "steps", in.steps);
        model_memory_json(o, &m);
        char *s = cJSON_PrintUnformatted(o);
        if (s)
            printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
    } else {
        printf("model      %s\nopset      %lld   producer %s\nbatch      %lld\n", model,
               (long long)in.opset, in.producer[0] ? in.producer : "-", (long long)in.batch);
        for (int outputs = 0; outputs < 2; outputs++) {
            size_t n = outputs ? vram_engine_output_count(e) : vram_engine_input_count(e);
            for (size_t i = 0; i < n; i++) {
                vram_tensor_desc d;
                char sh[160];
                (outputs ? vram_engine_output : vram_engine_input)(e, i, &d);
                shape_text(&d, sh, sizeof sh);
                printf("%-10s %-24s %-8s %s\n", outputs ? "output" : "input", d.name,
                       vram_dtype_name(d.dtype), sh);
            }
        }
        printf("nodes      %u (%u folded to constants at load, %u BatchNormalization fused "
               "into Conv; %u steps)\noperators ",
               in.nodes, in.folded_nodes, in.fused_batchnorms, in.steps);
        for (size_t i = 0; i < n_ops; i++)
            printf(" %s %u", ops[i].op, ops[i].count);
        printf("\n\nmemory                 MiB        bytes\n");
        printf("weights         %10.2f %12llu   once per engine\n", mib(m.weights_bytes),
               (unsigned long long)m.weights_bytes);
        printf("activations     %10.2f %12llu   arena per execution context; lower bound %llu (%.3fx)\n",
               mib(m.activations_bytes), (unsigned long long)m.activations_bytes,
               (unsigned long long)m.activations_lower_bound_bytes, ratio);
        printf("input/output    %10.2f %12llu   bindings per execution context\n", mib(m.io_bytes),
               (unsigned long long)m.io_bytes);
        printf("workspace       %10.2f %12llu   per execution context\n", mib(m.workspace_bytes),
               (unsigned long long)m.workspace_bytes);
        printf("one more context %9.2f %12llu   arena + bindings + workspace\n", mib(m.exec_bytes),
               (unsigned long long)m.exec_bytes);
    }
    free(ops);
    vram_engine_destroy(e);
    return 0;
}

typedef struct named_input {
    const char *name, *path;
} named_input;

/* Read the .npy for input i and check it against the model's input. */
static int feed_file(vram_exec *ctx, size_t i, const vram_tensor_desc *d, const char *path)
{
    vram_npy a;
    int rc = vram_npy_read(path, &a);
    if (rc)
        return cli_lib_error("model run", rc);
    int ok = a.dtype == d->dtype && a.rank == d->rank;
    for (int k = 0; ok && k < d->rank; k++)
        ok = a.dims[k] == d->dims[k];
    if (!ok) {
        char want[160];
        shape_text(d, want, sizeof want);
        fprintf(stderr, "vramkit model run: %s holds %s of rank %d; input '%s' takes %s %s\n",
                path, vram_dtype_name(a.dtype), a.rank, d->name, vram_dtype_name(d->dtype),
                want);
        vram_npy_free(&a);
        return 1;
    }
    rc = vram_exec_set_input(ctx, i, a.data, a.nbytes);
    vram_npy_free(&a);
    return rc ? cli_lib_error("model run", rc) : 0;
}

/* mkdir -p: the directory and any missing parent. */
static int make_dirs(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0777) && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(path, 0777) && errno != EEXIST ? -1 : 0;
}

static int write_outputs(const vram_engine *e, vram_exec *ctx, const char *dir, cJSON *list)
{
    if (make_dirs(dir)) {
        fprintf(stderr, "vramkit model run: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    for (size_t i = 0; i < vram_engine_output_count(e); i++) {
        vram_tensor_desc d;
        void *data = NULL;
        size_t bytes;
        vram_exec_output_desc(ctx, i, &d);
        int rc = model_read_output(ctx, i, &data, &bytes);
        char file[512], path[4096];
        if (!rc)
            rc = vram_npy_file_name(d.name, file, sizeof file);
        snprintf(path, sizeof path, "%s/%s.npy", dir, file);
        if (!rc)
            rc = vram_npy_write(path, d.dtype, d.rank, d.dims, data);
        free(data);
        if (rc)
            return cli_lib_error("model run", rc);
        if (list) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", d.name);
            cJSON_AddStringToObject(o, "file", path);
            cJSON_AddItemToArray(list, o);
        } else {
            printf("output %-24s -> %s\n", d.name, path);
        }
    }
    return 0;
}

static void print_json(const char *model, const model_opts *mo, const vram_engine *e,
                       cJSON *outputs, double first, const double *ms, long bench)
{
    vram_engine_memory m;
    vram_engine_memory_get(e, &m);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", model);
    cJSON_AddStringToObject(o, "executor", mo->backend);
    vram_engine_info in;
    vram_engine_info_get(e, &in);
    cJSON_AddNumberToObject(o, "batch", (double)in.batch);
    cJSON_AddBoolToObject(o, "batch_symbolic", in.batch_symbolic);
    cJSON_AddBoolToObject(o, "graph", mo->graph);
    cJSON_AddBoolToObject(o, "tf32", mo->tf32);
    if (!strcmp(mo->backend, "cpu")) {
        cJSON_AddNumberToObject(o, "threads", (double)mo->threads);
        cJSON_AddStringToObject(o, "kernels", mo->kernels);
    }
    model_memory_json(o, &m);
    cJSON_AddItemToObject(o, "outputs", outputs);
    cJSON_AddNumberToObject(o, "first_run_ms", first);
    if (bench > 0) {
        double sum = 0;
        for (long i = 0; i < bench; i++)
            sum += ms[i];
        cJSON *l = cJSON_AddObjectToObject(o, "latency_ms");
        cJSON_AddNumberToObject(l, "iterations", (double)bench);
        cJSON_AddNumberToObject(l, "mean", sum / (double)bench);
        cJSON_AddNumberToObject(l, "p50", ms[(bench - 1) / 2]);
        cJSON_AddNumberToObject(l, "p90", ms[(long)((double)(bench - 1) * 0.9)]);
        cJSON_AddNumberToObject(l, "p99", ms[(long)((double)(bench - 1) * 0.99)]);
        cJSON_AddNumberToObject(l, "min", ms[0]);
        cJSON_AddNumberToObject(l, "max", ms[bench - 1]);
    }
    char *text = cJSON_PrintUnformatted(o);
    if (text)
        printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
}

static int run(const char *model, const model_opts *mo, const named_input *in, int n_in,
               const char *dir, uint64_t seed, long bench, int json)
{
    vram_engine *e;
    int rc = model_load(model, mo, &e);
    if (rc)
        return cli_lib_error("model run", rc);
    model_note_batch("model run", model, mo, e);
    vram_exec *ctx = NULL;
    int status = 0;
    rc = vram_exec_create(e, &ctx);
    if (rc)
        status = cli_lib_error("model run", rc);
    for (int k = 0; !status && k < n_in; k++) { /* every --input must name an input */
        size_t i = 0, n = vram_engine_input_count(e);
        vram_tensor_desc d;
        while (i < n && (vram_engine_input(e, i, &d), strcmp(d.name, in[k].name)))
            i++;
        if (i == n)
            status = cli_usage_error("model run", "the model has no input named '%s'", in[k].name);
    }
    for (size_t i = 0; !status && i < vram_engine_input_count(e); i++) {
        vram_tensor_desc d;
        vram_engine_input(e, i, &d);
        const char *path = NULL;
        for (int k = 0; k < n_in; k++)
            if (!strcmp(in[k].name, d.name))
                path = in[k].path;
        if (path) {
            status = feed_file(ctx, i, &d, path);
            continue;
        }
        int64_t n = model_elems(&d);
        size_t bytes = (size_t)n * vram_dtype_size(d.dtype);
        void *buf = malloc(bytes ? bytes : 1);
        if (!buf) {
            status = 1;
            break;
        }
        model_fill_random(seed, i, d.dtype, n, buf);
        rc = vram_exec_set_input(ctx, i, buf, bytes);
        free(buf);
        if (rc)
            status = cli_lib_error("model run", rc);
    }
    double t0 = model_now_ms();
    if (!status && (rc = vram_exec_run(ctx)))
        status = cli_lib_error("model run", rc);
    double first = model_now_ms() - t0;
    cJSON *list = json ? cJSON_CreateArray() : NULL;
    double *ms = NULL;
    if (!status && bench > 0) {
        ms = calloc((size_t)bench, sizeof *ms);
        for (long i = 0; ms && !status && i < bench; i++) {
            double t = model_now_ms();
            if ((rc = vram_exec_run(ctx)))
                status = cli_lib_error("model run", rc);
            ms[i] = model_now_ms() - t;
        }
        if (ms && !status)
            qsort(ms, (size_t)bench, sizeof *ms, model_cmp_double);
        if (ms && !status && !json) {
            double sum = 0;
            for (long i = 0; i < bench; i++)
                sum += ms[i];
            printf("latency ms over %ld runs (first run %.3f): mean %.3f  p50 %.3f  p90 %.3f  "
                   "p99 %.3f  min %.3f  max %.3f\n",
                   bench, first, sum / (double)bench, ms[(bench - 1) / 2],
                   ms[(long)((double)(bench - 1) * 0.9)], ms[(long)((double)(bench - 1) * 0.99)],
                   ms[0], ms[bench - 1]);
        }
        if (!ms)
            status = 1;
    }
    if (!status) /* after the last run: what a replayed graph computed, with --graph */
        status = write_outputs(e, ctx, dir, list);
    if (!status && json)
        print_json(model, mo, e, list, first, ms, bench);
    else
        cJSON_Delete(list);
    free(ms);
    vram_exec_destroy(ctx);
    vram_engine_destroy(e);
    return status;
}

static int model_info(int argc, char **argv)
{
    model_opts mo;
    model_opts_init(&mo);
    int json = 0;
    const cli_opt opts[] = {
        MODEL_CLI_OPTS(&mo),
        {"--json", NULL, CLI_FLAG, &json, NULL, "one JSON object instead of the text"},
        {0},
    };
    const cli_spec spec = {"model info", "MODEL.onnx", about_info, opts, 1, 1, "model"};
    const char **args;
    int n, st = cli_parse(&spec, argc, argv, &args, &n);
    if (st)
        return st < 0 ? 0 : st;
    const char *model = args[0];
    free(args);
    st = model_check_opts("model info", &mo);
    return st ? st : info(model, &mo, json);
}

static int model_run(int argc, char **argv)
{
    model_opts mo;
    model_opts_init(&mo);
    int json = 0;
    uint64_t seed = 1, bench = 0;
    const char *dir = ".";
    cli_list inputs = {0};
    const cli_opt opts[] = {
        MODEL_CLI_OPTS(&mo),
        {"--graph", NULL, CLI_FLAG, &mo.graph, NULL,
         "cuda: capture the run into a CUDA graph and replay it"},
        {"--input", NULL, CLI_LIST, &inputs, "NAME=FILE.npy", "an input from a .npy file "
                                                              "(repeatable)"},
        {"--output-dir", NULL, CLI_STRING, &dir, "DIR", "where the outputs go (default .)"},
        {"--seed", NULL, CLI_UINT, &seed, "S", "seed of the random inputs (default 1)"},
        {"--bench", NULL, CLI_UINT, &bench, "N", "N more runs, timed", 0, 1e7},
        {"--json", NULL, CLI_FLAG, &json, NULL, "one JSON object instead of the text"},
        {0},
    };
    const cli_spec spec = {"model run", "MODEL.onnx", about_run, opts, 1, 1, "model"};
    const char **args;
    int n, st = cli_parse(&spec, argc, argv, &args, &n);
    if (st) {
        free(inputs.items);
        return st < 0 ? 0 : st;
    }
    const char *model = args[0];
    free(args);
    named_input *in = calloc((size_t)inputs.n + 1, sizeof *in);
    int n_in = 0, status = in ? 0 : 1;
    for (int k = 0; !status && k < inputs.n; k++) {
        const char *v = inputs.items[k], *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1]) {
            status = cli_usage_error("model run", "--input takes NAME=FILE.npy, not '%s'", v);
        } else {
            char *name = strndup(v, (size_t)(eq - v));
            in[n_in++] = (named_input){name, eq + 1};
            status = name ? 0 : 1;
        }
    }
    if (!status)
        status = model_check_opts("model run", &mo);
    if (!status)
        status = run(model, &mo, in, n_in, dir, seed, (long)bench, json);
    for (int k = 0; k < n_in; k++)
        free((char *)in[k].name);
    free(in);
    free(inputs.items);
    return status;
}

int cmd_model(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
    } subs[] = {{"info", model_info}, {"run", model_run}, {"sweep", cmd_model_sweep}};
    const char *names[] = {"info", "run", "sweep"};
    if (argc < 2) {
        fprintf(stderr, "usage: vramkit model info|run|sweep MODEL.onnx [options]\n\n%s",
                about_model);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: vramkit model info|run|sweep MODEL.onnx [options]\n\n%s", about_model);
        return 0;
    }
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (!strcmp(argv[1], subs[i].name))
            return subs[i].run(argc - 1, argv + 1);
    const char *close = cli_closest(argv[1], names, 3);
    if (close)
        return cli_usage_error("model", "unknown subcommand '%s' (did you mean %s?)", argv[1],
                               close);
    return cli_usage_error("model", "unknown subcommand '%s' (info, run or sweep)", argv[1]);
}
