/* src/observe/report_docs.c - the report's whole-document inputs: pool
 * snapshots (what vram_pool_snapshot writes, src/core/mem/snapshot.c) and OOM
 * reports. Each is checked member by member and copied into the page's data
 * with only the members the page reads, so the page's script can trust their
 * types. A snapshot's blocks become columns (offset from the lowest address,
 * size, state, owner...) sorted by address and checked not to overlap; past
 * max_blocks, neighbouring blocks of the same state, owner and kind (then
 * of the same state and owner) are merged for drawing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

#define MAX_EVENTS 1000u /* an OOM report's last events kept (the latest) */

static int oom(const char *name)
{
    return vram__fail(VRAM_EHOSTMEM, "out of host memory reading %s", name);
}

/* Put `item` at `key` of `o`; VRAM_EHOSTMEM (item freed) if either is NULL. */
static int add(cJSON *o, const char *key, cJSON *item)
{
    if (!o || !item || !cJSON_AddItemToObject(o, key, item)) {
        cJSON_Delete(item);
        return VRAM_EHOSTMEM;
    }
    return 0;
}

/* Copy the array `key` of `src` (objects with `fields`) to `dst`, keeping at
 * most the last `keep` elements (0: all). An absent or null array copies as
 * an empty one. */
static int copy_list(vram__rj *c, const cJSON *src, const char *key, const vram__rj_field *fields,
                     size_t nf, unsigned keep, cJSON *dst)
{
    const cJSON *arr;
    int rc = vram__rj_arr(c, src, key, VRAM__RJ_NULLABLE, &arr);
    if (rc < 0)
        return rc;
    cJSON *list = cJSON_CreateArray();
    if (!list)
        return oom(c->name);
    int n = arr ? cJSON_GetArraySize(arr) : 0, i = 0;
    for (const cJSON *e = arr ? arr->child : NULL; e; e = e->next, i++) {
        size_t k = vram__rj_key(c, key);
        vram__rj_index(c, (size_t)i);
        cJSON *o = NULL;
        if (!cJSON_IsObject(e))
            rc = vram__rj_fail(c, NULL, "is not an object");
        else if (!(o = cJSON_CreateObject()))
            rc = oom(c->name);
        else
            rc = vram__rj_copy(c, e, fields, nf, o);
        vram__rj_restore(c, k);
        if (rc) {
            cJSON_Delete(o);
            cJSON_Delete(list);
            return rc;
        }
        if (keep && i < n - (int)keep)
            cJSON_Delete(o); /* checked, not kept */
        else
            cJSON_AddItemToArray(list, o);
    }
    return add(dst, key, list) ? oom(c->name) : 0;
}

static int copy_object(vram__rj *c, const cJSON *src, const char *key, int flags,
                       const vram__rj_field *fields, size_t nf, cJSON *dst, const cJSON **found)
{
    const cJSON *o;
    int rc = vram__rj_obj(c, src, key, flags, &o);
    if (found)
        *found = o;
    if (rc < 0)
        return rc;
    if (!rc)
        return add(dst, key, cJSON_CreateNull()) ? oom(c->name) : 0;
    cJSON *copy = cJSON_CreateObject();
    if (!copy)
        return oom(c->name);
    size_t k = vram__rj_key(c, key);
    rc = vram__rj_copy(c, o, fields, nf, copy);
    vram__rj_restore(c, k);
    if (rc) {
        cJSON_Delete(copy);
        return rc;
    }
    return add(dst, key, copy) ? oom(c->name) : 0;
}

#define BYTES (VRAM__RJ_NULLABLE | VRAM__RJ_BYTES)
#define NONNEG (VRAM__RJ_NULLABLE | VRAM__RJ_NONNEG)

static const vram__rj_field gpu_fields[] = {
    {"index", 'n', NONNEG},      {"name", 's', VRAM__RJ_NULLABLE},
    {"total_bytes", 'n', BYTES}, {"used_bytes", 'n', BYTES},
};
static const vram__rj_field process_fields[] = {
    {"pid", 'n', NONNEG}, {"name", 's', VRAM__RJ_NULLABLE}, {"used_bytes", 'n', BYTES}};

/* ======================================================================
 * Snapshots
 * ====================================================================== */

enum { ST_LIVE, ST_PENDING, ST_FREE };
static const char *const state_names[] = {"live", "pending", "free"};
#define NONE UINT32_MAX

typedef struct block {
    uint64_t addr, size;
    double requested;
    uint32_t owner, kind, stream, count;
    uint8_t state;
} block;

static int parse_hex(const vram__rj *c, const char *key, const char *s, uint64_t *out)
{
    const char *p = s;
    if (p[0] != '0' || (p[1] != 'x' && p[1] != 'X') || !p[2])
        return vram__rj_fail(c, key, "is \"%.40s\", expected a hexadecimal address (0x...)", s);
    uint64_t v = 0;
    size_t digits = 0;
    for (p += 2; *p; p++, digits++) {
        int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10 : -1;
        if (d < 0 || digits >= 16)
            return vram__rj_fail(c, key, "is \"%.40s\", expected a 64-bit hexadecimal address", s);
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return 0;
}

static int cmp_block(const void *a, const void *b)
{
    const block *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Optional interned string: member `key` (string or null) -> index or NONE. */
static int intern(vram__rj *c, const cJSON *o, const char *key, vram__strtab *t, uint32_t *out)
{
    const char *s;
    int rc = vram__rj_str(c, o, key, VRAM__RJ_NULLABLE, &s);
    *out = NONE;
    if (rc <= 0)
        return rc;
    return vram__strtab_get(t, s, strlen(s), out);
}

static int read_blocks(vram__rj *c, const cJSON *arr, vram__strtab *owners, vram__strtab *kinds,
                       vram__strtab *streams, block **out, size_t *n_out)
{
    size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
    block *b = vram__calloc(n ? n : 1, sizeof *b);
    if (!b)
        return VRAM_EHOSTMEM;
    int rc = 0;
    for (const cJSON *e = arr->child; e && !rc; e = e->next, i++) {
        size_t k = vram__rj_key(c, "blocks");
        vram__rj_index(c, i);
        const char *addr, *state;
        double size;
        block *x = &b[i];
        if (!cJSON_IsObject(e)) {
            rc = vram__rj_fail(c, NULL, "is not an object");
        } else if ((rc = vram__rj_str(c, e, "address", VRAM__RJ_REQUIRED, &addr)) >= 0 &&
                   (rc = parse_hex(c, "address", addr, &x->addr)) >= 0 &&
                   (rc = vram__rj_num(c, e, "size", VRAM__RJ_REQUIRED | VRAM__RJ_BYTES, &size)) >= 0 &&
                   (rc = vram__rj_num(c, e, "requested", BYTES, &x->requested)) >= 0 &&
                   (rc = vram__rj_str(c, e, "state", VRAM__RJ_REQUIRED, &state)) >= 0 &&
                   (rc = intern(c, e, "owner", owners, &x->owner)) >= 0 &&
                   (rc = intern(c, e, "kind", kinds, &x->kind)) >= 0 &&
                   (rc = intern(c, e, "stream", streams, &x->stream)) >= 0) {
            rc = 0;
            x->size = (uint64_t)size;
            x->count = 1;
            int st = -1;
            for (int s = 0; s < 3; s++)
                if (strcmp(state, state_names[s]) == 0)
                    st = s;
            if (st < 0)
                rc = vram__rj_fail(c, "state", "is \"%.40s\", expected live, pending or free",
                                   state);
            else if (x->size == 0)
                rc = vram__rj_fail(c, "size", "is 0");
            else if (x->addr + x->size < x->addr)
                rc = vram__rj_fail(c, NULL, "ends past the 64-bit address space");
            else if (st != ST_FREE && x->owner == NONE)
                rc = vram__rj_fail(c, "owner", "is missing for a %s block", state_names[st]);
            x->state = (uint8_t)st;
            if (!isfinite(x->requested))
                x->requested = 0;
        }
        vram__rj_restore(c, k);
    }
    if (!rc) {
        qsort(b, n, sizeof *b, cmp_block);
        for (size_t j = 1; j < n && !rc; j++)
            if (b[j].addr < b[j - 1].addr + b[j - 1].size)
                rc = vram__rj_fail(c, "blocks",
                                   "overlap: 0x%llx (%llu bytes) and 0x%llx (%llu bytes)",
                                   (unsigned long long)b[j - 1].addr,
                                   (unsigned long long)b[j - 1].size,
                                   (unsigned long long)b[j].addr, (unsigned long long)b[j].size);
    }
    if (rc) {
        free(b);
        return rc;
    }
    *out = b;
    *n_out = n;
    return 0;
}

/* Merge neighbours (touching addresses) alike in state and owner, and in
 * kind too unless `any_kind`. Returns the new count. */
static size_t merge(block *b, size_t n, int any_kind)
{
    if (!n)
        return 0;
    size_t m = 0;
    for (size_t i = 1; i < n; i++) {
        block *last = &b[m];
        if (b[i].addr == last->addr + last->size && b[i].state == last->state &&
            b[i].owner == last->owner && (any_kind || b[i].kind == last->kind)) {
            last->size += b[i].size;
            last->requested += b[i].requested;
            last->count += b[i].count;
            if (b[i].kind != last->kind)
                last->kind = NONE;
            if (b[i].stream != last->stream)
                last->stream = NONE;
        } else {
            b[++m] = b[i];
        }
    }
    return m + 1;
}

static cJSON *names_json(const vram__strtab *t)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < t->n; i++) {
        cJSON *s = cJSON_CreateString(t->names[i]);
        if (!s) {
            cJSON_Delete(a);
            return NULL;
        }
        cJSON_AddItemToArray(a, s);
    }
    return a;
}

static int add_column(cJSON *o, const char *key, const block *b, size_t n, uint64_t base,
                      int which)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) {
        double v = which == 0   ? (double)(b[i].addr - base)
                   : which == 1 ? (double)b[i].size
                   : which == 2 ? b[i].requested
                   : which == 3 ? (double)b[i].state
                   : which == 4 ? (b[i].owner == NONE ? -1.0 : (double)b[i].owner)
                   : which == 5 ? (b[i].kind == NONE ? -1.0 : (double)b[i].kind)
                   : which == 6 ? (b[i].stream == NONE ? -1.0 : (double)b[i].stream)
                                : (double)b[i].count;
        cJSON *num = cJSON_CreateNumber(v);
        if (!num) {
            cJSON_Delete(a);
            return VRAM_EHOSTMEM;
        }
        cJSON_AddItemToArray(a, num);
    }
    return add(o, key, a);
}

static const vram__rj_field stats_fields[] = {
    {"live_bytes", 'n', BYTES},         {"peak_live_bytes", 'n', BYTES},
    {"allocated_bytes", 'n', BYTES},    {"reserved_bytes", 'n', BYTES},
    {"peak_reserved_bytes", 'n', BYTES}, {"free_bytes", 'n', BYTES},
    {"largest_free_bytes", 'n', BYTES}, {"fragmentation_ratio", 'n', NONNEG},
    {"pending_bytes", 'n', BYTES},      {"live_blocks", 'n', NONNEG},
    {"allocs_total", 'n', NONNEG},      {"frees_total", 'n', NONNEG},
    {"failed_allocs_total", 'n', NONNEG},
};
static const vram__rj_field usage_fields[] = {
    {"name", 's', VRAM__RJ_REQUIRED},  {"live_bytes", 'n', BYTES},
    {"peak_live_bytes", 'n', BYTES},   {"live_blocks", 'n', NONNEG},
    {"allocs_total", 'n', NONNEG},     {"frees_total", 'n', NONNEG},
    {"failed_allocs_total", 'n', NONNEG}, {"budget_bytes", 'n', BYTES},
};
static const vram__rj_field settings_fields[] = {
    {"granularity", 'n', BYTES}, {"capacity", 'n', BYTES}, {"alignment", 'n', BYTES}};
static const vram__rj_field segment_fields[] = {{"type", 's', VRAM__RJ_NULLABLE}};

int vram__report_snapshot(const char *name, const cJSON *doc, uint32_t max_blocks, cJSON **out,
                          char *summary, size_t cap)
{
    *out = NULL;
    vram__rj c = {.name = name};
    vram__strtab owners = {0}, kinds = {0}, streams = {0};
    block *b = NULL;
    size_t n = 0;
    cJSON *o = cJSON_CreateObject(), *segs = NULL;
    const char *pool;
    const cJSON *blocks, *seg_arr;
    int rc = o ? 0 : oom(name);
    static const vram__rj_field top[] = {{"pool", 's', VRAM__RJ_REQUIRED},
                                         {"gpu", 'n', VRAM__RJ_NONNEG},
                                         {"policy", 's', VRAM__RJ_NULLABLE},
                                         {"backend", 's', VRAM__RJ_NULLABLE}};
    if (rc || (rc = vram__rj_copy(&c, doc, top, VRAM__ARRAY_LEN(top), o)) ||
        (rc = copy_object(&c, doc, "stats", VRAM__RJ_NULLABLE, stats_fields,
                          VRAM__ARRAY_LEN(stats_fields), o, NULL)) ||
        (rc = copy_object(&c, doc, "settings", VRAM__RJ_NULLABLE, settings_fields,
                          VRAM__ARRAY_LEN(settings_fields), o, NULL)) ||
        (rc = copy_list(&c, doc, "owners", usage_fields, VRAM__ARRAY_LEN(usage_fields), 0, o)) ||
        (rc = copy_list(&c, doc, "kinds", usage_fields, VRAM__ARRAY_LEN(usage_fields), 0, o)) ||
        (rc = vram__rj_arr(&c, doc, "blocks", VRAM__RJ_REQUIRED, &blocks)) < 0 ||
        (rc = vram__rj_arr(&c, doc, "segments", VRAM__RJ_NULLABLE, &seg_arr)) < 0 ||
        (rc = read_blocks(&c, blocks, &owners, &kinds, &streams, &b, &n)))
        goto done;
    pool = cJSON_GetObjectItemCaseSensitive(o, "pool")->valuestring;

    /* Segments: address and size, checked; drawn as boundaries. */
    uint64_t base = n ? b[0].addr : 0;
    size_t ns = 0, i = 0;
    segs = cJSON_CreateObject();
    cJSON *s_off = cJSON_CreateArray(), *s_size = cJSON_CreateArray(), *s_type = cJSON_CreateArray();
    rc = add(segs, "offset", s_off) | add(segs, "size", s_size) | add(segs, "type", s_type);
    uint64_t *seg_addr = NULL;
    if (!rc && seg_arr && (ns = (size_t)cJSON_GetArraySize(seg_arr)) &&
        !(seg_addr = vram__calloc(ns * 2, sizeof *seg_addr)))
        rc = VRAM_EHOSTMEM;
    for (const cJSON *e = seg_arr ? seg_arr->child : NULL; e && !rc; e = e->next, i++) {
        size_t k = vram__rj_key(&c, "segments");
        vram__rj_index(&c, i);
        const char *addr;
        double size;
        cJSON *tmp = cJSON_CreateObject();
        if (!cJSON_IsObject(e))
            rc = vram__rj_fail(&c, NULL, "is not an object");
        else if ((rc = vram__rj_str(&c, e, "address", VRAM__RJ_REQUIRED, &addr)) >= 0 &&
                 (rc = parse_hex(&c, "address", addr, &seg_addr[2 * i])) >= 0 &&
                 (rc = vram__rj_num(&c, e, "size", VRAM__RJ_REQUIRED | VRAM__RJ_BYTES, &size)) >= 0)
            rc = tmp ? vram__rj_copy(&c, e, segment_fields, 1, tmp) : VRAM_EHOSTMEM;
        if (!rc) {
            seg_addr[2 * i + 1] = (uint64_t)size;
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(tmp, "type");
            cJSON *ts = cJSON_CreateString(cJSON_IsString(t) ? t->valuestring : "");
            if (ts)
                cJSON_AddItemToArray(s_type, ts);
            else
                rc = VRAM_EHOSTMEM;
        }
        cJSON_Delete(tmp);
        vram__rj_restore(&c, k);
    }
    /* Offsets count from the lowest address of a block or segment. */
    for (size_t j = 0; !rc && j < ns; j++)
        if ((!n && j == 0) || seg_addr[2 * j] < base)
            base = seg_addr[2 * j];
    for (size_t j = 0; !rc && j < ns; j++) {
        cJSON *a = cJSON_CreateNumber((double)(seg_addr[2 * j] - base));
        cJSON *z = cJSON_CreateNumber((double)seg_addr[2 * j + 1]);
        if (!a || !z) {
            cJSON_Delete(a);
            cJSON_Delete(z);
            rc = VRAM_EHOSTMEM;
        } else {
            cJSON_AddItemToArray(s_off, a);
            cJSON_AddItemToArray(s_size, z);
        }
    }
    free(seg_addr);
    if (rc)
        goto done;
    rc = add(o, "segments", segs);
    segs = NULL;

    /* Counts and bytes by state, before any merging. */
    uint64_t bytes[3] = {0, 0, 0}, count[3] = {0, 0, 0};
    for (size_t j = 0; j < n; j++) {
        bytes[b[j].state] += b[j].size;
        count[b[j].state]++;
    }
    size_t drawn = n;
    const char *merged = "none";
    if (drawn > max_blocks) {
        drawn = merge(b, drawn, 0);
        merged = "kind";
    }
    if (drawn > max_blocks) {
        drawn = merge(b, drawn, 1);
        merged = "owner";
    }
    char base_hex[24];
    snprintf(base_hex, sizeof base_hex, "0x%llx", (unsigned long long)base);
    cJSON *bo = cJSON_CreateObject();
    rc = rc ? rc : add(o, "blocks", bo);
    static const char *const colnames[] = {"offset", "size",  "requested", "state",
                                           "owner",  "kind",  "stream",    "count"};
    for (int w = 0; !rc && w < 8; w++)
        rc = add_column(bo, colnames[w], b, drawn, base, w);
    if (!rc)
        rc = add(o, "base", cJSON_CreateString(base_hex)) |
             add(o, "block_owners", names_json(&owners)) |
             add(o, "block_kinds", names_json(&kinds)) | add(o, "streams", names_json(&streams)) |
             add(o, "blocks_in_file", cJSON_CreateNumber((double)n)) |
             add(o, "blocks_drawn", cJSON_CreateNumber((double)drawn)) |
             add(o, "merged", cJSON_CreateString(merged));
    if (rc) {
        rc = rc == VRAM_EPARSE ? rc : oom(name);
        goto done;
    }
    char live[32], pend[32], held[32];
    snprintf(summary, cap,
             "snapshot of pool \"%s\": %zu blocks (%llu live, %llu pending, %llu free), %zu "
             "owner%s, %s live and %s pending in %s%s",
             pool, n, (unsigned long long)count[ST_LIVE], (unsigned long long)count[ST_PENDING],
             (unsigned long long)count[ST_FREE], owners.n, owners.n == 1 ? "" : "s",
             vram__fmt_bytes(live, sizeof live, bytes[ST_LIVE]),
             vram__fmt_bytes(pend, sizeof pend, bytes[ST_PENDING]),
             vram__fmt_bytes(held, sizeof held, bytes[0] + bytes[1] + bytes[2]),
             drawn < n ? "; neighbours merged for the map" : "");
done:
    cJSON_Delete(segs);
    free(b);
    vram__strtab_free(&owners);
    vram__strtab_free(&kinds);
    vram__strtab_free(&streams);
    if (rc) {
        cJSON_Delete(o);
        return rc < 0 ? rc : VRAM_EPARSE;
    }
    *out = o;
    return 0;
}

/* ======================================================================
 * OOM reports
 * ====================================================================== */

int vram__report_oom(const char *name, const cJSON *doc, cJSON **out, char *summary, size_t cap)
{
    *out = NULL;
    vram__rj c = {.name = name};
    static const vram__rj_field top[] = {
        {"time_s", 'n', VRAM__RJ_NULLABLE},
        {"pool", 's', VRAM__RJ_REQUIRED},
        {"pool_gpu", 'n', NONNEG},
        {"reserved_bytes", 'n', BYTES},
        {"live_bytes", 'n', BYTES},
        {"fragmentation_ratio", 'n', NONNEG},
        {"largest_free_bytes", 'n', BYTES},
        {"gpu_unavailable", 's', VRAM__RJ_NULLABLE},
        {"snapshot_path", 's', VRAM__RJ_NULLABLE},
        /* Beyond the contract's minimum, shown when present. */
        {"backend", 's', VRAM__RJ_NULLABLE},
        {"policy", 's', VRAM__RJ_NULLABLE},
        {"free_bytes", 'n', BYTES},
        {"pending_bytes", 'n', BYTES},
        {"capacity_bytes", 'n', BYTES},
        {"device_free_bytes", 'n', BYTES},
        {"trend_unavailable", 's', VRAM__RJ_NULLABLE},
    };
    static const vram__rj_field request[] = {
        {"size_bytes", 'n', VRAM__RJ_REQUIRED | VRAM__RJ_BYTES},
        {"owner", 's', VRAM__RJ_NULLABLE},
        {"kind", 's', VRAM__RJ_NULLABLE},
        {"stream", 's', VRAM__RJ_NULLABLE},
        {"error", 's', VRAM__RJ_NULLABLE},
        {"message", 's', VRAM__RJ_NULLABLE},
    };
    static const vram__rj_field owners[] = {
        {"owner", 's', VRAM__RJ_REQUIRED},
        {"live_bytes", 'n', VRAM__RJ_REQUIRED | VRAM__RJ_BYTES},
        {"peak_live_bytes", 'n', BYTES},
        {"budget_bytes", 'n', BYTES},
    };
    static const vram__rj_field kinds[] = {
        {"kind", 's', VRAM__RJ_REQUIRED},
        {"live_bytes", 'n', VRAM__RJ_REQUIRED | VRAM__RJ_BYTES},
    };
    static const vram__rj_field trend[] = {
        {"samples", 'n', NONNEG},
        {"slope_bytes_per_s", 'n', VRAM__RJ_NULLABLE},
        {"slope_bytes_per_iteration", 'n', VRAM__RJ_NULLABLE},
        {"slope_stderr_bytes_per_s", 'n', VRAM__RJ_NULLABLE},
        {"r2", 'n', VRAM__RJ_NULLABLE},
        {"confidence", 'n', VRAM__RJ_NULLABLE},
        {"growing", 'b', VRAM__RJ_NULLABLE},
    };
    static const vram__rj_field events[] = {
        {"action", 's', VRAM__RJ_REQUIRED},
        {"size_bytes", 'n', BYTES},
        {"owner", 's', VRAM__RJ_NULLABLE},
        {"kind", 's', VRAM__RJ_NULLABLE},
        {"stream", 's', VRAM__RJ_NULLABLE},
        {"address", 's', VRAM__RJ_NULLABLE},
        {"time_s", 'n', VRAM__RJ_NULLABLE},
    };
    static const vram__rj_field diagnosis[] = {
        {"cause", 's', VRAM__RJ_REQUIRED},
        {"line", 's', VRAM__RJ_REQUIRED},
    };
    cJSON *o = cJSON_CreateObject();
    const cJSON *gpu = NULL;
    int rc = o ? 0 : oom(name);
    if (rc || (rc = vram__rj_copy(&c, doc, top, VRAM__ARRAY_LEN(top), o)) ||
        (rc = copy_object(&c, doc, "request", VRAM__RJ_REQUIRED, request,
                          VRAM__ARRAY_LEN(request), o, NULL)) ||
        (rc = copy_object(&c, doc, "diagnosis", VRAM__RJ_REQUIRED, diagnosis,
                          VRAM__ARRAY_LEN(diagnosis), o, NULL)) ||
        (rc = copy_list(&c, doc, "owners", owners, VRAM__ARRAY_LEN(owners), 0, o)) ||
        (rc = copy_list(&c, doc, "kinds", kinds, VRAM__ARRAY_LEN(kinds), 0, o)) ||
        (rc = copy_object(&c, doc, "trend", VRAM__RJ_NULLABLE, trend, VRAM__ARRAY_LEN(trend), o,
                          NULL)) ||
        (rc = copy_list(&c, doc, "last_events", events, VRAM__ARRAY_LEN(events), MAX_EVENTS, o)) ||
        (rc = copy_object(&c, doc, "gpu", VRAM__RJ_NULLABLE, gpu_fields,
                          VRAM__ARRAY_LEN(gpu_fields), o, &gpu)))
        goto fail;
    if (gpu) {
        size_t k = vram__rj_key(&c, "gpu");
        rc = copy_list(&c, gpu, "processes", process_fields, VRAM__ARRAY_LEN(process_fields), 0,
                       cJSON_GetObjectItemCaseSensitive(o, "gpu"));
        vram__rj_restore(&c, k);
        if (rc)
            goto fail;
    }
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(o, "request");
    const cJSON *who = cJSON_GetObjectItemCaseSensitive(req, "owner");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(req, "error");
    const cJSON *line = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(o, "diagnosis"), "line");
    char size[32];
    snprintf(summary, cap, "OOM report: pool \"%s\", %s for %s%s%s refused (%s): %s",
             cJSON_GetObjectItemCaseSensitive(o, "pool")->valuestring,
             vram__fmt_bytes(size, sizeof size,
                             (uint64_t)cJSON_GetObjectItemCaseSensitive(req, "size_bytes")->valuedouble),
             cJSON_IsString(who) ? "owner \"" : "an unnamed owner",
             cJSON_IsString(who) ? who->valuestring : "", cJSON_IsString(who) ? "\"" : "",
             cJSON_IsString(err) ? err->valuestring : "no error code", line->valuestring);
    *out = o;
    return 0;
fail:
    cJSON_Delete(o);
    return rc;
}
