/* src/core/mem/stats.c - reading and printing a pool's statistics. The field
 * lists in vramkit/stats.h generate the text table and the JSON here. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/writef.h"
#include "json_internal.h"

unsigned vram__hist_bucket(uint64_t size)
{
    if (size <= 256)
        return 0;
    unsigned b = 63u - (unsigned)__builtin_clzll(size - 1) - 7u;
    return b < VRAM_HIST_BUCKETS ? b : VRAM_HIST_BUCKETS - 1;
}

uint64_t vram_hist_bucket_limit(unsigned i)
{
    if (i >= VRAM_HIST_BUCKETS - 1)
        return UINT64_MAX;
    return 256ull << i;
}

void vram__usage_to_stats(const vram__usage *u, uint64_t budget, vram_usage_stats *out)
{
    *out = (vram_usage_stats){
        .live_bytes = u->live_bytes,
        .peak_live_bytes = u->peak_live_bytes,
        .live_blocks = u->live_blocks,
        .allocs_total = u->allocs_total,
        .frees_total = u->frees_total,
        .failed_allocs_total = u->failed_allocs_total,
        .budget_bytes = budget,
        .charged_bytes = u->charged_bytes,
    };
}

uint64_t vram__pool_free_bytes(const vram_pool *p)
{
    uint64_t used = p->st.allocated_bytes + p->st.pending_bytes;
    return p->st.reserved_bytes > used ? p->st.reserved_bytes - used : 0;
}

uint64_t vram__pool_largest_free(vram_pool *p)
{
    return p->ops->largest_free(p);
}

void vram__pool_fill_stats(vram_pool *p, vram_pool_stats *out)
{
    *out = p->st;
    out->free_bytes = vram__pool_free_bytes(p);
    out->largest_free_bytes = out->free_bytes ? vram__pool_largest_free(p) : 0;
    if (out->largest_free_bytes > out->free_bytes)
        out->largest_free_bytes = out->free_bytes;
    out->fragmentation_ratio =
        out->free_bytes ? 1.0 - (double)out->largest_free_bytes / (double)out->free_bytes : 0.0;
}

int vram_pool_stats_get(vram_pool *p, vram_pool_stats *out)
{
    if (!p || !out)
        return vram__fail(VRAM_EINVAL, "vram_pool_stats_get: pool and out are required");
    vram__pool_lock(p);
    vram__pool_fill_stats(p, out);
    vram__pool_unlock(p);
    return 0;
}

int vram_pool_stats_counters(vram_pool *p, vram_pool_stats *out)
{
    if (!p || !out)
        return vram__fail(VRAM_EINVAL, "vram_pool_stats_counters: pool and out are required");
    vram__pool_lock(p);
    *out = p->st;
    out->free_bytes = vram__pool_free_bytes(p);
    vram__pool_unlock(p);
    out->largest_free_bytes = 0;
    out->fragmentation_ratio = 0.0;
    return 0;
}

int vram_owner_stats_get(vram_pool *p, vram_owner owner, vram_usage_stats *out)
{
    if (!p || !out)
        return vram__fail(VRAM_EINVAL, "vram_owner_stats_get: pool and out are required");
    vram__pool_lock(p);
    int rc = 0;
    if (owner >= p->n_owners)
        rc = vram__fail(VRAM_EINVAL, "pool \"%s\" has no owner %u", p->name, owner);
    else
        vram__usage_to_stats(&p->owners[owner].u, p->owners[owner].budget, out);
    vram__pool_unlock(p);
    return rc;
}

int vram_kind_stats_get(vram_pool *p, vram_kind kind, vram_usage_stats *out)
{
    if (!p || !out)
        return vram__fail(VRAM_EINVAL, "vram_kind_stats_get: pool and out are required");
    if ((unsigned)kind >= VRAM_KIND_COUNT)
        return vram__fail(VRAM_EINVAL, "unknown kind %d", (int)kind);
    vram__pool_lock(p);
    vram__usage_to_stats(&p->kinds[kind], 0, out);
    vram__pool_unlock(p);
    return 0;
}

void vram_pool_reset_peaks(vram_pool *p)
{
    if (!p)
        return;
    vram__pool_lock(p);
    p->st.peak_live_bytes = p->st.live_bytes;
    p->st.peak_reserved_bytes = p->st.reserved_bytes;
    for (size_t i = 0; i < p->n_owners; i++)
        p->owners[i].u.peak_live_bytes = p->owners[i].u.live_bytes;
    for (int k = 0; k < VRAM_KIND_COUNT; k++)
        p->kinds[k].peak_live_bytes = p->kinds[k].live_bytes;
    vram__pool_unlock(p);
}

/* ---- JSON ---- */

#define JSON_U64(j, key, v) vram__json_u64(j, key, v)
#define JSON_F64(j, key, v) vram__json_f64(j, key, v)

static void usage_json(vram__json *j, const char *name, const vram_usage_stats *u)
{
    vram__json_object(j, NULL);
    vram__json_str(j, "name", name);
#define USAGE_JSON(field, type, help) JSON_##type(j, #field, u->field);
    VRAM_USAGE_STATS(USAGE_JSON)
#undef USAGE_JSON
    vram__json_end(j);
}

static void stats_json(vram__json *j, const vram_pool_stats *s)
{
    vram__json_object(j, "stats");
#define POOL_JSON(field, type, help) JSON_##type(j, #field, s->field);
    VRAM_POOL_STATS(POOL_JSON)
#undef POOL_JSON
    vram__json_array(j, "histogram");
    for (unsigned i = 0; i < VRAM_HIST_BUCKETS; i++) {
        vram__json_object(j, NULL);
        if (i + 1 < VRAM_HIST_BUCKETS)
            vram__json_u64(j, "le_bytes", vram_hist_bucket_limit(i));
        else
            vram__json_str(j, "le_bytes", "+Inf");
        vram__json_u64(j, "allocs", s->hist_allocs[i]);
        vram__json_u64(j, "live_blocks", s->hist_live[i]);
        vram__json_end(j);
    }
    vram__json_end(j);
    vram__json_end(j);
}

void vram__pool_summary_json(vram_pool *p, vram__json *j)
{
    vram_pool_stats s;
    vram__pool_fill_stats(p, &s);
    vram__json_str(j, "pool", p->name);
    if (p->gpu >= 0)
        vram__json_i64(j, "gpu", p->gpu);
    vram__json_str(j, "policy", vram_policy_name(p->policy));
    vram__json_str(j, "backend", p->backend->ops->name);
    stats_json(j, &s);
    vram__json_array(j, "owners");
    for (size_t i = 0; i < p->n_owners; i++) {
        vram_usage_stats u;
        vram__usage_to_stats(&p->owners[i].u, p->owners[i].budget, &u);
        usage_json(j, p->owners[i].name, &u);
    }
    vram__json_end(j);
    vram__json_array(j, "kinds");
    for (int k = 0; k < VRAM_KIND_COUNT; k++) {
        vram_usage_stats u;
        vram__usage_to_stats(&p->kinds[k], 0, &u);
        usage_json(j, vram_kind_name((vram_kind)k), &u);
    }
    vram__json_end(j);
}

/* ---- text ---- */

typedef vram__writer out;
#define outf vram__writef

#define TEXT_U64(o, name, v) outf(o, "  %-24s %20llu\n", name, (unsigned long long)(v))
#define TEXT_F64(o, name, v) outf(o, "  %-24s %20.4f\n", name, (v))

static void usage_row(out *o, const char *name, const vram__usage *u, uint64_t budget)
{
    char l[32], pk[32], b[32];
    outf(o, "  %-16s %12s %12s %10llu %10llu %8llu %12s\n", name,
         vram__fmt_bytes(l, sizeof l, u->live_bytes), vram__fmt_bytes(pk, sizeof pk, u->peak_live_bytes),
         (unsigned long long)u->live_blocks, (unsigned long long)u->allocs_total,
         (unsigned long long)u->failed_allocs_total,
         budget ? vram__fmt_bytes(b, sizeof b, budget) : "-");
}

int vram_pool_stats_print(vram_pool *p, vram_write_fn write, void *ctx, unsigned flags)
{
    if (!p || !write || (flags & ~VRAM_PRINT_JSON))
        return vram__fail(VRAM_EINVAL, "vram_pool_stats_print: pool, write and known flags are "
                                       "required");
    vram__pool_lock(p);
    if (flags & VRAM_PRINT_JSON) { /* built under the lock, written after it */
        vram_buffer b = {0};
        vram__json j;
        vram__json_begin(&j, &b);
        vram__json_object(&j, NULL);
        vram__pool_summary_json(p, &j);
        vram__json_end(&j);
        vram__pool_unlock(p);
        return vram__json_flush(&b, vram__json_done(&j), write, ctx);
    }
    /* The text too is built under the lock and written after it. */
    vram_pool_stats s;
    vram__pool_fill_stats(p, &s);
    vram_buffer text = {0};
    out o = {vram_write_buffer, &text, 0};
    outf(&o, "pool \"%s\" (policy %s, backend %s)\n", p->name, vram_policy_name(p->policy),
         p->backend->ops->name);
#define POOL_TEXT(field, type, help) TEXT_##type(&o, #field, s.field);
    VRAM_POOL_STATS(POOL_TEXT)
#undef POOL_TEXT
    outf(&o, "\n  %-16s %12s %12s %10s %10s %8s %12s\n", "owner", "live", "peak", "blocks",
         "allocs", "failed", "budget");
    for (size_t i = 0; i < p->n_owners; i++)
        usage_row(&o, p->owners[i].name, &p->owners[i].u, p->owners[i].budget);
    outf(&o, "\n  %-16s %12s %12s %10s %10s %8s %12s\n", "kind", "live", "peak", "blocks",
         "allocs", "failed", "");
    for (int k = 0; k < VRAM_KIND_COUNT; k++)
        if (p->kinds[k].allocs_total || p->kinds[k].failed_allocs_total)
            usage_row(&o, vram_kind_name((vram_kind)k), &p->kinds[k], 0);
    outf(&o, "\n  %-16s %12s %12s\n", "size up to", "allocs", "live");
    for (unsigned i = 0; i < VRAM_HIST_BUCKETS; i++) {
        if (!s.hist_allocs[i])
            continue;
        char b[32];
        outf(&o, "  %-16s %12llu %12llu\n",
             i + 1 < VRAM_HIST_BUCKETS ? vram__fmt_bytes(b, sizeof b, vram_hist_bucket_limit(i))
                                       : "larger",
             (unsigned long long)s.hist_allocs[i], (unsigned long long)s.hist_live[i]);
    }
    vram__pool_unlock(p);
    if (!o.rc)
        o.rc = write(ctx, text.data ? text.data : "", text.len);
    vram_buffer_free(&text);
    return o.rc;
}
