/* src/observe/metrics.c - the Prometheus text exposition (format 0.0.4) of
 * pools, GPUs and a monitor. The pool families come from the X-macro lists
 * of vramkit/stats.h, so a field added there appears here with its help.
 *
 * The format wants every sample of a family in one group after its HELP and
 * TYPE lines, so every pool is read first (each under its own lock, through
 * the public statistics calls) and the families are written afterwards, one
 * at a time across all pools. The text itself is written by prom.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "metrics_internal.h"
#include "prom.h"
#include "vramkit/config.h"
#include "vramkit/monitor.h"
#include "vramkit/nvml.h"
#include "vramkit/stats.h"

/* ---- the pools ---- */

/* The fields of the X-macro lists, with where they lie in their struct. */
#define METRICS_F64_U64 0
#define METRICS_F64_F64 1
typedef struct field {
    const char *name, *help;
    int f64;
    size_t offset;
} field;

#define POOL_FIELD(f, type, help) {#f, help, METRICS_F64_##type, offsetof(vram_pool_stats, f)},
static const field pool_fields[] = {VRAM_POOL_STATS(POOL_FIELD)};
#undef POOL_FIELD
#define USAGE_FIELD(f, type, help) {#f, help, METRICS_F64_##type, offsetof(vram_usage_stats, f)},
static const field usage_fields[] = {VRAM_USAGE_STATS(USAGE_FIELD)};
#undef USAGE_FIELD

static uint64_t field_u64(const void *rec, const field *f)
{
    uint64_t v;
    memcpy(&v, (const char *)rec + f->offset, sizeof v);
    return v;
}

static double field_f64(const void *rec, const field *f)
{
    double v;
    memcpy(&v, (const char *)rec + f->offset, sizeof v);
    return v;
}

static void sample_field(vram__prom *e, const char *name, const vram__prom_label *labels, int n,
                         const void *rec, const field *f)
{
    if (f->f64)
        vram__prom_sample_f64(e, name, labels, n, field_f64(rec, f));
    else
        vram__prom_sample_u64(e, name, labels, n, field_u64(rec, f));
}

typedef struct pool_data {
    const char *name; /* the pool's own string: valid while it is exposed */
    char gpu[12];     /* its gpu label's value; empty: none */
    vram_pool_stats st;
    size_t n_owners;
    const char **owner_names;
    vram_usage_stats *owners;
    vram_usage_stats kinds[VRAM_KIND_COUNT];
} pool_data;

static int read_pool(vram_pool *pool, pool_data *d)
{
    d->name = vram_pool_name(pool);
    d->gpu[0] = '\0';
    if (vram_pool_gpu(pool) >= 0)
        snprintf(d->gpu, sizeof d->gpu, "%d", vram_pool_gpu(pool));
    int rc = vram_pool_stats_get(pool, &d->st);
    size_t cap_names = 0, cap_owners = 0;
    for (vram_owner o = 0; !rc && o < VRAM_OWNERS_MAX; o++) {
        const char *name = vram_owner_name(pool, o);
        if (!name)
            break;
        const char **names = vram__grow(d->owner_names, &cap_names, d->n_owners, sizeof *names, 8);
        if (!names)
            return VRAM_EHOSTMEM;
        d->owner_names = names;
        vram_usage_stats *us = vram__grow(d->owners, &cap_owners, d->n_owners, sizeof *us, 8);
        if (!us)
            return VRAM_EHOSTMEM;
        d->owners = us;
        rc = vram_owner_stats_get(pool, o, &d->owners[d->n_owners]);
        d->owner_names[d->n_owners++] = name;
    }
    for (int k = 0; !rc && k < VRAM_KIND_COUNT; k++)
        rc = vram_kind_stats_get(pool, (vram_kind)k, &d->kinds[k]);
    return rc;
}

/* A pool's labels into l (room for 3): pool, gpu when it has one, then
 * key=value when key is given. Returns how many. */
static int pool_labels(const pool_data *d, vram__prom_label *l, const char *key,
                       const char *value)
{
    int n = 0;
    l[n++] = (vram__prom_label){"pool", d->name};
    if (d->gpu[0])
        l[n++] = (vram__prom_label){"gpu", d->gpu};
    if (key)
        l[n++] = (vram__prom_label){key, value};
    return n;
}

static void print_pools(vram__prom *e, const pool_data *d, size_t n)
{
    vram__prom_label l[3];
    char name[128], help[256];
    for (size_t f = 0; f < VRAM__ARRAY_LEN(pool_fields); f++) {
        snprintf(name, sizeof name, "vram_pool_%s", pool_fields[f].name);
        vram__prom_family(e, name, vram__prom_type_of(name), pool_fields[f].help);
        for (size_t p = 0; p < n; p++) {
            sample_field(e, name, l, pool_labels(&d[p], l, NULL, NULL), &d[p].st,
                         &pool_fields[f]);
        }
    }
    for (size_t f = 0; f < VRAM__ARRAY_LEN(usage_fields); f++) {
        const field *uf = &usage_fields[f];
        int budget = strcmp(uf->name, "budget_bytes") == 0;
        snprintf(name, sizeof name, "vram_pool_owner_%s", uf->name);
        if (budget)
            snprintf(help, sizeof help, "per owner: its budget (owners without one have no series)");
        else
            snprintf(help, sizeof help, "per owner: %s", uf->help);
        vram__prom_family(e, name, vram__prom_type_of(name), help);
        for (size_t p = 0; p < n; p++)
            for (size_t o = 0; o < d[p].n_owners; o++) {
                if (budget && !d[p].owners[o].budget_bytes)
                    continue;
                int k = pool_labels(&d[p], l, "owner", d[p].owner_names[o]);
                sample_field(e, name, l, k, &d[p].owners[o], uf);
            }
        if (budget) /* kinds have no budget */
            continue;
        snprintf(name, sizeof name, "vram_pool_kind_%s", uf->name);
        snprintf(help, sizeof help, "per kind: %s", uf->help);
        vram__prom_family(e, name, vram__prom_type_of(name), help);
        for (size_t p = 0; p < n; p++)
            for (int k = 0; k < VRAM_KIND_COUNT; k++) {
                int c = pool_labels(&d[p], l, "kind", vram_kind_name((vram_kind)k));
                sample_field(e, name, l, c, &d[p].kinds[k], uf);
            }
    }
    /* The block-size histogram: per size class, so that each family sums to
     * the pool's count (a Prometheus histogram would also need the sum of
     * the sizes, which the pool does not keep). */
    for (int which = 0; which < 2; which++) {
        const char *fam = which ? "vram_pool_size_class_live_blocks" : "vram_pool_size_class_allocs_total";
        vram__prom_family(e, fam, which ? "gauge" : "counter",
                          which ? "live blocks per class of requested size (up_to_bytes: the "
                                  "class's upper bound; the one below is its lower bound, "
                                  "exclusive)"
                                : "allocations per class of requested size (up_to_bytes: the "
                                  "class's upper bound; the one below is its lower bound, "
                                  "exclusive)");
        for (size_t p = 0; p < n; p++)
            for (unsigned i = 0; i < VRAM_HIST_BUCKETS; i++) {
                char up[32];
                if (i + 1 < VRAM_HIST_BUCKETS)
                    snprintf(up, sizeof up, "%llu", (unsigned long long)vram_hist_bucket_limit(i));
                else
                    snprintf(up, sizeof up, "+Inf");
                vram__prom_sample_u64(e, fam, l, pool_labels(&d[p], l, "up_to_bytes", up),
                                      which ? d[p].st.hist_live[i] : d[p].st.hist_allocs[i]);
            }
    }
}

/* ---- the GPUs ---- */

int vram__metrics_check_gpu(int gpu, const char *pci_bus_id)
{
    if (pci_bus_id || gpu >= 0 || gpu == VRAM_GPU_ALL || gpu == VRAM_GPU_NONE)
        return 0;
    return vram__fail(VRAM_EINVAL, "metrics: gpu %d is none of an NVML index, VRAM_GPU_ALL and "
                                   "VRAM_GPU_NONE (the exposition is not one pool's)", gpu);
}

/* NVML's readings of the GPUs `which` (or the one at `pci`) selects: *n
 * read, or none and the reason in `why`. */
static vram_gpu_memory *read_gpus(int which, const char *pci, unsigned *n, char *why,
                                  size_t why_cap)
{
    *n = 0;
    why[0] = '\0';
    int count = 0, first = which;
    int rc = 0;
    if (pci) {
        count = 1;
    } else if (which == VRAM_GPU_ALL) {
        rc = vram_gpu_count(&count);
        first = 0;
    } else {
        count = 1;
    }
    if (rc || count <= 0) {
        snprintf(why, why_cap, "%s", rc ? vram_last_error() : "NVML sees no GPU");
        return NULL;
    }
    vram_gpu_memory *g = vram__calloc((size_t)count, sizeof *g);
    if (!g) {
        snprintf(why, why_cap, "%s", vram_last_error());
        return NULL;
    }
    for (int i = 0; i < count; i++) {
        rc = pci ? vram_gpu_memory_read_pci(pci, &g[*n]) : vram_gpu_memory_read(first + i, &g[*n]);
        if (rc) /* keep the first reason; the other GPUs may still be read */
            snprintf(why + strlen(why), why_cap - strlen(why), "%s%s", why[0] ? "; " : "",
                     vram_last_error());
        else
            (*n)++;
    }
    return g;
}

static void print_gpus(vram__prom *e, int which, const char *pci)
{
    if (which == VRAM_GPU_NONE && !pci)
        return;
    char why[512];
    unsigned n;
    vram_gpu_memory *g = read_gpus(which, pci, &n, why, sizeof why);
    vram__prom_family(e, "vram_nvml_available", "gauge",
                      "1 when NVML answered for the GPUs below, 0 when it could not (no GPU families then)");
    vram__prom_sample_u64(e, "vram_nvml_available", NULL, 0, n > 0);
    if (why[0])
        vram__prom_comment(e, "# vram_nvml_available: ", why);
    if (!n) {
        free(g);
        return;
    }
    static const struct {
        const char *name, *help;
        size_t offset;
    } mem[] = {
        {"vram_gpu_memory_total_bytes", "device memory of the GPU (NVML)",
         offsetof(vram_gpu_memory, total_bytes)},
        {"vram_gpu_memory_used_bytes", "device memory in use by every process and the driver (NVML)",
         offsetof(vram_gpu_memory, used_bytes)},
        {"vram_gpu_memory_free_bytes", "device memory free (NVML)",
         offsetof(vram_gpu_memory, free_bytes)},
    };
    char gpu[16];
    vram__prom_family(e, "vram_gpu_info", "gauge", "the GPU's name, as a label (always 1)");
    for (unsigned i = 0; i < n; i++) {
        snprintf(gpu, sizeof gpu, "%d", g[i].index);
        vram__prom_label l[] = {{"gpu", gpu}, {"name", g[i].name}};
        vram__prom_sample_u64(e, "vram_gpu_info", l, 2, 1);
    }
    for (size_t f = 0; f < VRAM__ARRAY_LEN(mem); f++) {
        vram__prom_family(e, mem[f].name, "gauge", mem[f].help);
        for (unsigned i = 0; i < n; i++) {
            uint64_t v;
            memcpy(&v, (const char *)&g[i] + mem[f].offset, sizeof v);
            snprintf(gpu, sizeof gpu, "%d", g[i].index);
            vram__prom_label l[] = {{"gpu", gpu}};
            vram__prom_sample_u64(e, mem[f].name, l, 1, v);
        }
    }
    vram__prom_family(e, "vram_gpu_processes", "gauge",
                      "compute processes using the GPU (where NVML lists them)");
    for (unsigned i = 0; i < n; i++) {
        if (!g[i].processes_known)
            continue;
        snprintf(gpu, sizeof gpu, "%d", g[i].index);
        vram__prom_label l[] = {{"gpu", gpu}};
        vram__prom_sample_u64(e, "vram_gpu_processes", l, 1, g[i].n_processes_total);
    }
    vram__prom_family(e, "vram_gpu_process_memory_used_bytes", "gauge",
                      "device memory of one process (NVML; the processes using the most, at most 64)");
    for (unsigned i = 0; i < n; i++) {
        if (!g[i].processes_known)
            continue;
        snprintf(gpu, sizeof gpu, "%d", g[i].index);
        unsigned np = g[i].n_processes < VRAM_GPU_MAX_PROCESSES ? g[i].n_processes
                                                                : VRAM_GPU_MAX_PROCESSES;
        for (unsigned p = 0; p < np; p++) {
            const vram_gpu_process *pr = &g[i].processes[p];
            if (pr->used_bytes == VRAM_GPU_BYTES_UNKNOWN)
                continue;
            /* A PID listed twice (one entry per MIG instance, say) is one
             * series: its entries are summed, once, at the first. */
            int seen = 0;
            uint64_t used = 0;
            for (unsigned q = 0; q < np && !seen; q++) {
                const vram_gpu_process *o = &g[i].processes[q];
                if (o->pid != pr->pid || o->used_bytes == VRAM_GPU_BYTES_UNKNOWN)
                    continue;
                if (q < p)
                    seen = 1;
                else
                    used += o->used_bytes;
            }
            if (seen)
                continue;
            char pid[16];
            snprintf(pid, sizeof pid, "%u", pr->pid);
            vram__prom_label l[] = {{"gpu", gpu}, {"pid", pid}, {"process", pr->name}};
            vram__prom_sample_u64(e, "vram_gpu_process_memory_used_bytes", l, 3, used);
        }
    }
    free(g);
}

/* ---- entry points ---- */

int vram__metrics_check_pools(vram_pool *const *pools, size_t n)
{
    if (n && !pools)
        return vram__fail(VRAM_EINVAL, "metrics: %zu pools but no array of them", n);
    for (size_t i = 0; i < n; i++) {
        if (!pools[i])
            return vram__fail(VRAM_EINVAL, "metrics: pool %zu of %zu is NULL", i, n);
        for (size_t j = 0; j < i; j++) {
            if (pools[j] == pools[i])
                return vram__fail(VRAM_EINVAL, "metrics: pool \"%s\" is listed twice (%zu and %zu)",
                                  vram_pool_name(pools[i]), j, i);
            if (strcmp(vram_pool_name(pools[j]), vram_pool_name(pools[i])) == 0)
                return vram__fail(VRAM_EINVAL,
                                  "metrics: pools %zu and %zu are both named \"%s\"; the name "
                                  "labels their series, so it must be unique",
                                  j, i, vram_pool_name(pools[i]));
        }
    }
    return 0;
}

int vram__metrics_print(vram_pool *const *pools, size_t n, vram_monitor *monitor, int gpu,
                        const char *pci_bus_id, vram_write_fn write, void *ctx)
{
    pool_data *d = n ? vram__calloc(n, sizeof *d) : NULL;
    if (n && !d)
        return VRAM_EHOSTMEM;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = read_pool(pools[i], &d[i]);
    vram__prom e = {.write = write, .ctx = ctx};
    if (!rc) {
        print_pools(&e, d, n);
        print_gpus(&e, gpu, pci_bus_id);
        if (!e.rc && monitor)
            e.rc = vram_monitor_print_metrics(monitor, write, ctx, 0);
        rc = e.rc;
    }
    for (size_t i = 0; i < n; i++) {
        free(d[i].owner_names);
        free(d[i].owners);
    }
    free(d);
    return rc;
}

int vram_metrics_opts_init(vram_metrics_opts *o)
{
    if (!o)
        return vram__fail(VRAM_EINVAL, "vram_metrics_opts_init: opts is NULL");
    int rc = vram_config_load();
    const vram_config *c = vram_config_get();
    *o = (vram_metrics_opts){
        .size = sizeof *o,
        .gpu = VRAM_GPU_ALL,
        .address = c->metrics_address,
        .port = c->metrics_port > 65535 ? 0 : (unsigned)c->metrics_port,
    };
    const char *g = c->metrics_gpu && *c->metrics_gpu ? c->metrics_gpu : "all";
    int prc = vram_gpu_parse(g, &o->gpu, &o->gpu_pci_bus_id);
    if (!prc)
        prc = vram__metrics_check_gpu(o->gpu, o->gpu_pci_bus_id);
    if (prc) {
        o->gpu = VRAM_GPU_ALL;
        o->gpu_pci_bus_id = NULL;
        if (!rc)
            rc = vram__fail_prefix(prc, "VRAM_METRICS_GPU: ");
    }
    if (!rc && c->metrics_port > 65535)
        rc = vram__fail(VRAM_EINVAL, "VRAM_METRICS_PORT %llu is above 65535",
                        (unsigned long long)c->metrics_port);
    return rc;
}

int vram_metrics_print(const vram_metrics_opts *o, vram_write_fn write, void *ctx, unsigned flags)
{
    if (!o || !write || flags)
        return vram__fail(VRAM_EINVAL, "vram_metrics_print: opts and write are required, and "
                                       "flags 0 (the exposition is text)");
    vram_metrics_opts taken;
    vram_metrics_opts_init(&taken); /* the caller's options decide, not the environment */
    int rc = vram__opts_take(&taken, o, sizeof taken, "vram_metrics_opts");
    o = &taken;
    if (!rc)
        rc = vram__metrics_check_gpu(o->gpu, o->gpu_pci_bus_id);
    if (!rc)
        rc = vram__metrics_check_pools(o->pools, o->n_pools);
    return rc ? rc
              : vram__metrics_print(o->pools, o->n_pools, o->monitor, o->gpu, o->gpu_pci_bus_id,
                                    write, ctx);
}
