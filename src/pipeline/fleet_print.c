/* src/pipeline/fleet_print.c - a fleet's statistics printed: every GPU's
 * table (or JSON object) with its state, the failover counts and the
 * streams that a failed GPU lost, with why (vram_fleet_print). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "base/json_out.h"
#include "base/writef.h"
#include "fleet_internal.h"

/* The lost streams as a JSON array, into b. */
static int lost_json(vram_fleet *f, vram_buffer *b)
{
    vram__json j;
    vram__json_begin(&j, b);
    vram__json_array(&j, NULL);
    pthread_mutex_lock(&f->mu);
    for (size_t s = 0; s < f->n_streams; s++) {
        const fleet_stream *e = f->streams[s];
        if (!e->lost)
            continue;
        vram__json_object(&j, NULL);
        vram__json_str(&j, "id", e->id);
        vram__json_str(&j, "url", e->url);
        vram__json_i64(&j, "gpu", f->gpu[e->at]);
        vram__json_str(&j, "error", e->error);
        vram__json_end(&j);
    }
    pthread_mutex_unlock(&f->mu);
    vram__json_end(&j);
    return vram__json_done(&j);
}

/* The lost streams as lines: "  ID (URL), was on GPU N: why"; gathered
 * under the fleet's lock, written after it. */
static void lost_text(vram_fleet *f, vram__writer *o)
{
    vram_buffer b = {0};
    vram__writer into = {vram_write_buffer, &b, 0};
    pthread_mutex_lock(&f->mu);
    for (size_t s = 0; s < f->n_streams && !into.rc; s++) {
        const fleet_stream *e = f->streams[s];
        if (e->lost)
            vram__writef(&into, "  %s (%s), was on GPU %d: %s\n", e->id, e->url,
                         f->gpu[e->at], e->error);
    }
    pthread_mutex_unlock(&f->mu);
    if (!o->rc)
        o->rc = into.rc ? into.rc : b.len ? o->write(o->ctx, b.data, b.len) : 0;
    vram_buffer_free(&b);
}

/* A JSON string of s (escaped), through o. */
static void json_string(vram__writer *o, const char *s)
{
    vram_buffer b = {0};
    vram__json j;
    vram__json_begin(&j, &b);
    vram__json_str(&j, NULL, s);
    int rc = vram__json_flush(&b, vram__json_done(&j), o->write, o->ctx);
    if (!o->rc)
        o->rc = rc;
}

int vram_fleet_print(vram_fleet *f, vram_write_fn write, void *ctx, unsigned flags)
{
    if (!f || !write)
        return vram__fail(VRAM_EINVAL, "vram_fleet_print: NULL argument");
    vram__writer o = {write, ctx, 0};
    int json = (flags & VRAM_PRINT_JSON) != 0;
    uint64_t moved = 0, lost = 0;
    vram_fleet_failover_counts(f, &moved, &lost);
    if (json)
        vram__writef(&o, "{\"gpus\": [");
    for (size_t i = 0; i < f->n && !o.rc; i++) {
        char why[256];
        int up = vram_service_health(f->svc[i], why, sizeof why) == 0;
        if (json) {
            vram__writef(&o, "%s{\"gpu\": %d, \"up\": %s, \"reason\": ", i ? ", " : "",
                         f->gpu[i], up ? "true" : "false");
            json_string(&o, why);
            vram__writef(&o, ", \"service\": ");
        } else {
            vram__writef(&o, "%sGPU %d%s%s\n", i ? "\n" : "", f->gpu[i], up ? "" : ": failed: ",
                         up ? "" : why);
        }
        if (!o.rc)
            o.rc = vram_service_print(f->svc[i], write, ctx, flags);
        if (json)
            vram__writef(&o, "}");
    }
    if (json) {
        vram__writef(&o, "], \"moved\": %llu, \"lost\": %llu, \"lost_streams\": ",
                     (unsigned long long)moved, (unsigned long long)lost);
        vram_buffer b = {0};
        int rc = vram__json_flush(&b, lost_json(f, &b), write, ctx);
        if (!o.rc)
            o.rc = rc;
        vram__writef(&o, "}\n");
    } else {
        vram__writef(&o, "\nstreams moved off failed GPUs %llu, lost %llu\n",
                     (unsigned long long)moved, (unsigned long long)lost);
        lost_text(f, &o);
    }
    return o.rc;
}
