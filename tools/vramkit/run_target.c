/* tools/vramkit/run_target.c - one service or a fleet behind the calls
 * `vramkit run` makes (run_target.h), and --gpus. */
#include "run_target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int run_target_create(run_target *t, const vram_service_opts *o, const int *gpus, size_t n_gpus,
                      uint64_t total)
{
    memset(t, 0, sizeof *t);
    if (!n_gpus)
        return vram_service_create(o, &t->svc);
    vram_fleet_opts fo;
    vram_fleet_opts_init(&fo);
    fo.service = *o;
    fo.gpus = gpus;
    fo.n_gpus = n_gpus;
    fo.budget = total;
    return vram_fleet_create(&fo, &t->fleet);
}

int run_target_destroy(run_target *t)
{
    int rc = t->fleet ? vram_fleet_destroy(t->fleet) : vram_service_destroy(t->svc);
    memset(t, 0, sizeof *t);
    return rc;
}

size_t run_target_services(const run_target *t)
{
    return t->fleet ? vram_fleet_gpus(t->fleet) : t->svc != NULL;
}

vram_service *run_target_service(const run_target *t, size_t i)
{
    return t->fleet ? vram_fleet_service(t->fleet, i) : i == 0 ? t->svc : NULL;
}

int run_target_add(run_target *t, const vram_stream_opts *o)
{
    if (t->fleet)
        return vram_fleet_add_stream(t->fleet, o, NULL, 0, NULL);
    const char *id = NULL;
    return vram_service_add_stream(t->svc, o, &id);
}

static int streams_into(run_target *t, vram_stream_stats *out, size_t cap, size_t *n)
{
    return t->fleet ? vram_fleet_streams(t->fleet, out, cap, n)
                    : vram_service_streams(t->svc, out, cap, n);
}

vram_stream_stats *run_target_streams(run_target *t, size_t *n)
{
    size_t want = 0;
    *n = 0;
    streams_into(t, NULL, 0, &want);
    /* Streams come and go between the count and the copy: a few more. */
    vram_stream_stats *s = calloc(want + 8, sizeof *s);
    if (s)
        streams_into(t, s, want + 8, n);
    if (*n > want + 8)
        *n = want + 8;
    return s;
}

int run_target_wait(run_target *t, double timeout_s)
{
    return t->fleet ? vram_fleet_wait(t->fleet, timeout_s) : vram_service_wait(t->svc, timeout_s);
}

int run_target_serve(run_target *t, vram_metrics *server)
{
    return t->fleet ? vram_fleet_serve(t->fleet, server) : vram_service_serve(t->svc, server);
}

int run_target_print(run_target *t, vram_write_fn write, void *ctx, unsigned flags)
{
    return t->fleet ? vram_fleet_print(t->fleet, write, ctx, flags)
                    : vram_service_print(t->svc, write, ctx, flags);
}

int run_target_stop(run_target *t)
{
    return t->fleet ? vram_fleet_stop(t->fleet) : vram_service_stop(t->svc);
}

void run_target_default_gpus(const char *executor, int *gpus, size_t cap, size_t *n)
{
    *n = 0;
    vram_config_source from = VRAM_CONFIG_DEFAULT;
    int count = 0;
    if (!executor || strcmp(executor, "cuda") || vram_config_source_of("device", &from) ||
        from != VRAM_CONFIG_DEFAULT || vram_device_count(&count) || count < 2)
        return;
    for (int i = 0; i < count && *n < cap; i++)
        gpus[(*n)++] = i;
    fprintf(stderr, "run: %d GPUs visible: one service on each (VRAM_DEVICE=N for one)\n",
            count);
}

int run_target_parse_gpus(const char *v, int *gpus, size_t cap, size_t *n)
{
    *n = 0;
    if (!strcmp(v, "all")) {
        int count = 0;
        if (vram_device_count(&count))
            return cli_usage_error("run", "--gpus all: cannot count the GPUs: %s",
                                   vram_last_error());
        if (count <= 0)
            return cli_usage_error("run", "--gpus all: no GPU is visible");
        for (int i = 0; i < count && *n < cap; i++)
            gpus[(*n)++] = i;
        return 0;
    }
    if (tool_parse_gpus(v, 1023, gpus, cap, n))
        return cli_usage_error("run", "--gpus: %s (a list, or all)", vram_last_error());
    return 0;
}
