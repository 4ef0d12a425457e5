/* tests/integration/test_pool_api.c - the pool's public contract, call by
 * call: creation and destruction for both policies, alignment, argument
 * errors, owners and budgets, frees of pointers the pool does not know,
 * refusal to destroy while blocks live, exact statistics and the histogram,
 * trim, out-of-memory with its message, the JSON snapshot and statistics,
 * the cross-stream reuse rule on the sim backend, configuration overrides,
 * and the error table. Uses only the public API (vramkit.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include <vramkit.h>


#define KiB (1024ull)
#define MiB (1024ull * 1024)
#define GiB (1024ull * 1024 * 1024)

#define STREAM_A ((vram_stream)(uintptr_t)0x1)
#define STREAM_B ((vram_stream)(uintptr_t)0x2)

/* ---- helpers ------------------------------------------------------------ */

static vram_backend *sim_new(uint64_t capacity, uint64_t granularity)
{
    vram_backend *b = NULL;
    vram_backend_opts bo = {.capacity = capacity, .granularity = granularity};
    int rc = vram_backend_create("sim", &bo, &b);
    if (rc)
        fail_msg("vram_backend_create(sim): %s: %s", vram_err_name(rc), vram_last_error());
    assert_non_null(b);
    return b;
}

/* Options from the configuration, with a backend, a policy and an alignment
 * (0: the configured one). */
static vram_pool_opts opts_for(vram_backend *b, vram_policy policy, uint64_t alignment)
{
    vram_pool_opts o;
    assert_int_equal(vram_pool_opts_init(&o), 0);
    o.backend = b;
    o.policy = policy;
    if (alignment)
        o.alignment = alignment;
    return o;
}

static vram_pool *pool_new(const vram_pool_opts *o)
{
    vram_pool *p = NULL;
    int rc = vram_pool_create(o, &p);
    if (rc)
        fail_msg("vram_pool_create: %s: %s", vram_err_name(rc), vram_last_error());
    assert_non_null(p);
    return p;
}

static void *alloc_ok(vram_pool *p, uint64_t size, vram_owner owner, vram_kind kind, vram_stream s)
{
    void *ptr = NULL;
    int rc = vram_pool_alloc(p, size, owner, kind, s, &ptr);
    if (rc)
        fail_msg("vram_pool_alloc(%llu): %s: %s", (unsigned long long)size, vram_err_name(rc),
                 vram_last_error());
    assert_non_null(ptr);
    return ptr;
}

static void free_ok(vram_pool *p, void *ptr, vram_stream s)
{
    int rc = vram_pool_free(p, ptr, s);
    if (rc)
        fail_msg("vram_pool_free(%p): %s: %s", ptr, vram_err_name(rc), vram_last_error());
}

static vram_pool_stats stats_of(vram_pool *p)
{
    vram_pool_stats st;
    memset(&st, 0, sizeof st);
    assert_int_equal(vram_pool_stats_get(p, &st), 0);
    return st;
}

static vram_usage_stats owner_stats(vram_pool *p, vram_owner o)
{
    vram_usage_stats u;
    memset(&u, 0, sizeof u);
    assert_int_equal(vram_owner_stats_get(p, o, &u), 0);
    return u;
}

static vram_usage_stats kind_stats(vram_pool *p, vram_kind k)
{
    vram_usage_stats u;
    memset(&u, 0, sizeof u);
    assert_int_equal(vram_kind_stats_get(p, k, &u), 0);
    return u;
}

static uint64_t held_of(vram_backend *b)
{
    vram_backend_stats bs;
    vram_backend_stats_get(b, &bs);
    return bs.held_bytes;
}

static unsigned bucket_of(uint64_t size)
{
    for (unsigned i = 0; i < VRAM_HIST_BUCKETS; i++)
        if (size <= vram_hist_bucket_limit(i))
            return i;
    return VRAM_HIST_BUCKETS - 1;
}

static void destroy_ok(vram_pool *p, vram_backend *b)
{
    int rc = vram_pool_destroy(p);
    if (rc)
        fail_msg("vram_pool_destroy: %s: %s", vram_err_name(rc), vram_last_error());
    if (b) {
        assert_int_equal(held_of(b), 0);
        assert_int_equal(vram_backend_destroy(b), 0);
    }
}

static cJSON *parse_json(const vram_buffer *sb)
{
    assert_non_null(sb->data);
    cJSON *j = cJSON_ParseWithLength(sb->data, sb->len);
    if (!j)
        fail_msg("not JSON near: %.80s", cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "?");
    return j;
}

static const vram_policy policies[] = {VRAM_POLICY_VMM, VRAM_POLICY_SEGMENTS};

/* ---- creation ------------------------------------------------------------ */

static void test_create_defaults(void **state)
{
    (void)state;
    /* NULL options: the pool makes its own backend from the configuration. */
    vram_pool *p = NULL;
    assert_int_equal(vram_pool_create(NULL, &p), 0);
    assert_non_null(p);
    assert_non_null(vram_pool_name(p));
    assert_string_equal(vram_pool_name(p), "pool");
    assert_non_null(vram_pool_backend(p));
    void *ptr = alloc_ok(p, 1000, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER, NULL);
    assert_int_equal((uintptr_t)ptr % 256, 0);
    free_ok(p, ptr, NULL);
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_pool_destroy(NULL), 0);

    /* Options initialised from the configuration. */
    vram_pool_opts o;
    assert_int_equal(vram_pool_opts_init(&o), 0);
    assert_int_equal(o.alignment, 256);
    assert_int_equal(o.policy, VRAM_POLICY_VMM);
    for (size_t i = 0; i < 2; i++) {
        vram_backend *b = sim_new(1 * GiB, 2 * MiB);
        o = opts_for(b, policies[i], 0);
        o.name = "apipool";
        p = pool_new(&o);
        assert_string_equal(vram_pool_name(p), "apipool");
        assert_int_equal(vram_pool_policy(p), policies[i]);
        assert_ptr_equal(vram_pool_backend(p), b);
        ptr = alloc_ok(p, 4096, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, STREAM_A);
        free_ok(p, ptr, STREAM_A);
        destroy_ok(p, b);
    }
}

static void test_create_explicit(void **state)
{
    (void)state;
    char name[32] = "explicit";
    for (size_t i = 0; i < 2; i++) {
        vram_backend *b = sim_new(1 * GiB, 2 * MiB);
        vram_pool_opts o = {
            .name = name,
            .backend = b,
            .policy = policies[i],
            .alignment = 512,
            .granularity = 2 * MiB,
            .retain_min = 8 * MiB,
            .limit = 512 * MiB,
            .small_size = 1 * MiB,
            .large_round = 128 * KiB,
            .segment_small = 2 * MiB,
            .segment_medium = 20 * MiB,
            .configured_listeners = 0,
        };
        vram_pool *p = pool_new(&o);
        strcpy(name, "clobbered"); /* the pool keeps its own copy */
        assert_string_equal(vram_pool_name(p), "explicit");
        strcpy(name, "explicit");
        assert_int_equal(vram_pool_policy(p), policies[i]);
        void *ptrs[6];
        const uint64_t sizes[6] = {1, 513, 100 * KiB, 3 * MiB, 12 * MiB + 5, 700};
        for (int k = 0; k < 6; k++) {
            ptrs[k] = alloc_ok(p, sizes[k], VRAM_OWNER_DEFAULT, VRAM_KIND_WORKSPACE, STREAM_A);
            assert_int_equal((uintptr_t)ptrs[k] % 512, 0);
            vram_block_info bi;
            assert_int_equal(vram_pool_block_info(p, ptrs[k], &bi), 0);
            assert_int_equal(bi.requested, sizes[k]);
            assert_true(bi.size >= sizes[k]);
            assert_int_equal(bi.size % 512, 0);
            if (policies[i] == VRAM_POLICY_VMM && sizes[k] > 1 * MiB) {
                /* vmm: large requests are rounded to large_round */
                assert_int_equal(bi.size % (128 * KiB), 0);
                assert_true(bi.size < sizes[k] + 128 * KiB);
            }
        }
        for (int k = 0; k < 6; k++)
            free_ok(p, ptrs[k], STREAM_A);
        destroy_ok(p, b);
    }
    /* Bad options are refused and nothing leaks. */
    vram_backend *b = sim_new(1 * GiB, 2 * MiB);
    vram_pool_opts o = opts_for(b, VRAM_POLICY_VMM, 0);
    o.alignment = 300; /* not a power of two */
    vram_pool *p = (vram_pool *)(uintptr_t)1;
    assert_int_equal(vram_pool_create(&o, &p), VRAM_EINVAL);
    assert_null(p);
    o = opts_for(b, (vram_policy)7, 0);
    p = (vram_pool *)(uintptr_t)1;
    assert_int_equal(vram_pool_create(&o, &p), VRAM_EINVAL);
    assert_null(p);
    assert_int_equal(vram_backend_destroy(b), 0); /* no user left behind */
}

static void test_alignment(void **state)
{
    (void)state;
    const uint64_t aligns[2] = {0 /* configured: 256 */, 4096};
    for (size_t i = 0; i < 2; i++) {
        for (size_t a = 0; a < 2; a++) {
            uint64_t align = aligns[a] ? aligns[a] : 256;
            vram_backend *b = sim_new(4 * GiB, 2 * MiB);
            vram_pool_opts o = opts_for(b, policies[i], aligns[a]);
            vram_pool *p = pool_new(&o);
            void *ptrs[64];
            uint64_t size = 1;
            for (int k = 0; k < 64; k++) {
                size = size * 3 + (uint64_t)k; /* 1 .. a few hundred MiB, odd sizes */
                if (size > 200 * MiB)
                    size = (uint64_t)k * 777 + 1;
                ptrs[k] = alloc_ok(p, size, VRAM_OWNER_DEFAULT, VRAM_KIND_ACTIVATIONS, STREAM_A);
                if ((uintptr_t)ptrs[k] % align)
                    fail_msg("block %p of %llu bytes not aligned to %llu", ptrs[k],
                             (unsigned long long)size, (unsigned long long)align);
            }
            for (int k = 0; k < 64; k += 2)
                free_ok(p, ptrs[k], STREAM_A);
            for (int k = 0; k < 64; k += 2) { /* reuse of freed space stays aligned */
                ptrs[k] = alloc_ok(p, (uint64_t)k * 1000 + 3, VRAM_OWNER_DEFAULT, VRAM_KIND_IO,
                                   STREAM_A);
                assert_int_equal((uintptr_t)ptrs[k] % align, 0);
            }
            for (int k = 0; k < 64; k++)
                free_ok(p, ptrs[k], STREAM_A);
            destroy_ok(p, b);
        }
    }
}

/* ---- arguments and owners -------------------------------------------------- */

static void test_invalid_args(void **state)
{
    (void)state;
    for (size_t i = 0; i < 2; i++) {
        vram_backend *b = sim_new(1 * GiB, 2 * MiB);
        vram_pool_opts o = opts_for(b, policies[i], 0);
        vram_pool *p = pool_new(&o);
        vram_pool_stats before = stats_of(p);
        void *ptr = (void *)(uintptr_t)0xdead;
        assert_int_equal(vram_pool_alloc(p, 0, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, STREAM_A, &ptr),
                         VRAM_EINVAL);
        assert_null(ptr);
        assert_true(strlen(vram_last_error()) > 0);
        ptr = (void *)(uintptr_t)0xdead;
        assert_int_equal(vram_pool_alloc(p, 64, 12345, VRAM_KIND_IO, STREAM_A, &ptr), VRAM_EINVAL);
        assert_null(ptr);
        ptr = (void *)(uintptr_t)0xdead;
        assert_int_equal(
            vram_pool_alloc(p, 64, VRAM_OWNER_DEFAULT, VRAM_KIND_COUNT, STREAM_A, &ptr),
            VRAM_EINVAL);
        assert_null(ptr);
        vram_usage_stats u;
        assert_int_equal(vram_owner_stats_get(p, 999, &u), VRAM_EINVAL);
        assert_int_equal(vram_kind_stats_get(p, VRAM_KIND_COUNT, &u), VRAM_EINVAL);
        assert_int_equal(vram_owner_set_budget(p, 999, 1), VRAM_EINVAL);
        vram_block_info bi;
        assert_int_equal(vram_pool_block_info(p, (void *)(uintptr_t)0x1000, &bi), VRAM_ENOTALLOC);
        vram_pool_stats after = stats_of(p);
        assert_int_equal(after.live_blocks, before.live_blocks);
        assert_int_equal(after.allocs_total, before.allocs_total);
        destroy_ok(p, b);
    }
}

static void test_owners(void **state)
{
    (void)state;
    vram_backend *b = sim_new(1 * GiB, 2 * MiB);
    vram_pool_opts o = opts_for(b, VRAM_POLICY_VMM, 0);
    vram_pool *p = pool_new(&o);
    vram_owner def = 77;
    assert_int_equal(vram_owner_find(p, "default", &def), 0);
    assert_int_equal(def, VRAM_OWNER_DEFAULT);
    assert_string_equal(vram_owner_name(p, VRAM_OWNER_DEFAULT), "default");

    char name[16] = "cam00";
    vram_owner a, a2, c;
    assert_int_equal(vram_owner_create(p, name, 0, &a), 0);
    strcpy(name, "xxxxx"); /* the pool copies the name */
    assert_int_not_equal(a, VRAM_OWNER_DEFAULT);
    assert_string_equal(vram_owner_name(p, a), "cam00");
    assert_int_equal(vram_owner_find(p, "cam00", &a2), 0);
    assert_int_equal(a2, a);
    assert_int_equal(vram_owner_create(p, "cam00", 0, &a2), VRAM_EINVAL);
    assert_int_equal(vram_owner_create(p, "default", 0, &a2), VRAM_EINVAL);
    assert_int_equal(vram_owner_find(p, "nobody", &a2), VRAM_EINVAL);
    assert_int_equal(vram_owner_create(p, "cam01", 5 * MiB, &c), 0);
    assert_int_not_equal(c, a);
    assert_null(vram_owner_name(p, 4000));
    vram_usage_stats u = owner_stats(p, c);
    assert_int_equal(u.budget_bytes, 5 * MiB);
    assert_int_equal(u.live_bytes, 0);

    /* At most VRAM_OWNERS_MAX owners (whether "default" counts among them
     * is not said: either count is accepted), then VRAM_ELIMIT. */
    unsigned created = 3; /* default, cam00, cam01 */
    int rc = 0;
    for (unsigned i = 0; i < VRAM_OWNERS_MAX + 10 && rc == 0; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "bulk%u", i);
        vram_owner ob;
        rc = vram_owner_create(p, nm, 0, &ob);
        if (rc == 0)
            created++;
    }
    assert_int_equal(rc, VRAM_ELIMIT);
    assert_true(created == VRAM_OWNERS_MAX || created == VRAM_OWNERS_MAX + 1);
    /* The last owner works. */
    char last[32];
    snprintf(last, sizeof last, "bulk%u", created - 4);
    vram_owner lo;
    assert_int_equal(vram_owner_find(p, last, &lo), 0);
    void *x = alloc_ok(p, 1000, lo, VRAM_KIND_OTHER, STREAM_A);
    assert_int_equal(owner_stats(p, lo).live_bytes, 1000);
    free_ok(p, x, STREAM_A);
    destroy_ok(p, b);
}

static void test_budgets(void **state)
{
    (void)state;
    for (size_t i = 0; i < 2; i++) {
        vram_backend *b = sim_new(1 * GiB, 2 * MiB);
        vram_pool_opts o = opts_for(b, policies[i], 0);
        vram_pool *p = pool_new(&o);
        vram_owner cam7, cam8;
        assert_int_equal(vram_owner_create(p, "cam07", 8 * MiB, &cam7), 0);
        assert_int_equal(vram_owner_create(p, "cam08", 8 * MiB, &cam8), 0);

        void *x = alloc_ok(p, 6 * MiB, cam7, VRAM_KIND_FRAMES, STREAM_A);
        void *ptr = (void *)(uintptr_t)0xdead;
        vram_clear_error();
        assert_int_equal(vram_pool_alloc(p, 4 * MiB, cam7, VRAM_KIND_FRAMES, STREAM_A, &ptr),
                         VRAM_EBUDGET);
        assert_null(ptr);
        const char *msg = vram_last_error();
        if (!strstr(msg, "cam07") || !strstr(msg, "budget"))
            fail_msg("budget message lacks the owner or the word budget: \"%s\"", msg);
        /* Another owner's request of the same size still succeeds. */
        void *y = alloc_ok(p, 4 * MiB, cam8, VRAM_KIND_FRAMES, STREAM_A);
        /* Exactly at the budget is allowed. */
        void *z = alloc_ok(p, 2 * MiB, cam7, VRAM_KIND_FRAMES, STREAM_A);
        ptr = (void *)(uintptr_t)0xdead;
        assert_int_equal(vram_pool_alloc(p, 1, cam7, VRAM_KIND_FRAMES, STREAM_A, &ptr),
                         VRAM_EBUDGET);
        assert_null(ptr);

        vram_usage_stats u7 = owner_stats(p, cam7);
        assert_int_equal(u7.live_bytes, 8 * MiB);
        assert_int_equal(u7.live_blocks, 2);
        assert_int_equal(u7.failed_allocs_total, 2);
        assert_int_equal(u7.allocs_total, 2);
        assert_int_equal(u7.budget_bytes, 8 * MiB);
        vram_usage_stats u8 = owner_stats(p, cam8);
        assert_int_equal(u8.failed_allocs_total, 0);
        vram_pool_stats st = stats_of(p);
        assert_int_equal(st.budget_failures_total, 2);
        assert_int_equal(st.failed_allocs_total, 2);
        assert_int_equal(st.allocs_total, 3);

        /* Lowering the budget below the live bytes: allowed; requests fail
         * until enough is freed. */
        assert_int_equal(vram_owner_set_budget(p, cam7, 4 * MiB), 0);
        assert_int_equal(owner_stats(p, cam7).budget_bytes, 4 * MiB);
        assert_int_equal(owner_stats(p, cam7).live_bytes, 8 * MiB);
        ptr = (void *)(uintptr_t)0xdead;
        assert_int_equal(vram_pool_alloc(p, 256, cam7, VRAM_KIND_FRAMES, STREAM_A, &ptr),
                         VRAM_EBUDGET);
        assert_null(ptr);
        free_ok(p, x, STREAM_A); /* live 2 MiB of 4 */
        void *w = alloc_ok(p, 2 * MiB, cam7, VRAM_KIND_FRAMES, STREAM_A);
        ptr = (void *)(uintptr_t)0xdead;
        assert_int_equal(vram_pool_alloc(p, 256, cam7, VRAM_KIND_FRAMES, STREAM_A, &ptr),
                         VRAM_EBUDGET);
        /* Budget 0: none. */
        assert_int_equal(vram_owner_set_budget(p, cam7, 0), 0);
        void *big = alloc_ok(p, 64 * MiB, cam7, VRAM_KIND_FRAMES, STREAM_A);
        assert_int_equal(owner_stats(p, cam7).budget_bytes, 0);

        free_ok(p, y, STREAM_A);
        free_ok(p, z, STREAM_A);
        free_ok(p, w, STREAM_A);
        free_ok(p, big, STREAM_A);
        destroy_ok(p, b);
    }
}

/* Charges: a driver's own memory counted against an owner's budget and in
 * the owner's and kind's live bytes, never in the pool's blocks. */
static void test_charges(void **state)
{
    (void)state;
    vram_backend *b = sim_new(1 * GiB, 2 * MiB);
    vram_pool_opts o = opts_for(b, policies[0], 0);
    vram_pool *p = pool_new(&o);
    vram_owner cam;
    assert_int_equal(vram_owner_create(p, "cam09", 32 * MiB, &cam), 0);
    void *x = alloc_ok(p, 4 * MiB, cam, VRAM_KIND_FRAMES, STREAM_A);
    assert_int_equal(vram_pool_charge(p, 20 * MiB, cam, VRAM_KIND_DECODER), 0);
    vram_usage_stats u = owner_stats(p, cam);
    assert_int_equal(u.live_bytes, 24 * MiB);
    assert_int_equal(u.charged_bytes, 20 * MiB);
    assert_int_equal(u.live_blocks, 1);
    vram_usage_stats k;
    assert_int_equal(vram_kind_stats_get(p, VRAM_KIND_DECODER, &k), 0);
    assert_int_equal(k.live_bytes, 20 * MiB);
    assert_int_equal(k.charged_bytes, 20 * MiB);
    vram_pool_stats st = stats_of(p);
    assert_int_equal(st.live_bytes, 4 * MiB); /* blocks only */
    assert_int_equal(st.charged_bytes, 20 * MiB);
    /* The budget counts charges and blocks together. */
    vram_clear_error();
    assert_int_equal(vram_pool_charge(p, 9 * MiB, cam, VRAM_KIND_DECODER), VRAM_EBUDGET);
    if (!strstr(vram_last_error(), "cam09") || !strstr(vram_last_error(), "a charge of 9.00 MiB"))
        fail_msg("the refusal names neither the owner nor the charge: \"%s\"", vram_last_error());
    void *ptr = NULL;
    assert_int_equal(vram_pool_alloc(p, 9 * MiB, cam, VRAM_KIND_IO, STREAM_A, &ptr), VRAM_EBUDGET);
    assert_int_equal(owner_stats(p, cam).live_bytes, 24 * MiB);
    /* Giving back more than was charged changes nothing. */
    assert_int_equal(vram_pool_uncharge(p, 21 * MiB, cam, VRAM_KIND_DECODER), VRAM_EINVAL);
    if (!strstr(vram_last_error(), "20.0 MiB charged"))
        fail_msg("the refusal does not say what is charged: \"%s\"", vram_last_error());
    assert_int_equal(vram_pool_uncharge(p, 1 * MiB, cam, VRAM_KIND_FRAMES), VRAM_EINVAL);
    assert_int_equal(owner_stats(p, cam).charged_bytes, 20 * MiB);
    /* Bad arguments. */
    assert_int_equal(vram_pool_charge(NULL, 1, cam, VRAM_KIND_DECODER), VRAM_EINVAL);
    assert_int_equal(vram_pool_charge(p, 0, cam, VRAM_KIND_DECODER), VRAM_EINVAL);
    assert_int_equal(vram_pool_charge(p, 1, 999, VRAM_KIND_DECODER), VRAM_EINVAL);
    assert_int_equal(vram_pool_charge(p, 1, cam, (vram_kind)99), VRAM_EINVAL);
    assert_int_equal(vram_pool_uncharge(p, 20 * MiB, cam, VRAM_KIND_DECODER), 0);
    u = owner_stats(p, cam);
    assert_int_equal(u.live_bytes, 4 * MiB);
    assert_int_equal(u.charged_bytes, 0);
    assert_int_equal(u.peak_live_bytes, 24 * MiB);
    assert_int_equal(stats_of(p).charged_bytes, 0);
    free_ok(p, x, STREAM_A);
    destroy_ok(p, b);
}

/* ---- frees and destruction --------------------------------------------------- */

static void test_bad_frees(void **state)
{
    (void)state;
    for (size_t i = 0; i < 2; i++) {
        vram_backend *b = sim_new(1 * GiB, 2 * MiB);
        vram_pool_opts o = opts_for(b, policies[i], 0);
        vram_pool *p = pool_new(&o);
        void *keep = alloc_ok(p, 3000, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, STREAM_A);
        void *x = alloc_ok(p, 5000, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, STREAM_A);

        vram_pool_stats before = stats_of(p);
        /* NULL: a no-op returning 0. */
        assert_int_equal(vram_pool_free(p, NULL, STREAM_A), 0);
        assert_int_equal(vram_pool_free(p, NULL, STREAM_B), 0);
        vram_pool_stats after = stats_of(p);
        assert_memory_equal(&before, &after, sizeof before);

        /* Unknown pointers, including one inside a live block. */
        assert_int_equal(vram_pool_free(p, (void *)(uintptr_t)0x12345600, STREAM_A),
                         VRAM_ENOTALLOC);
        assert_true(strlen(vram_last_error()) > 0);
        assert_int_equal(vram_pool_free(p, (char *)keep + 256, STREAM_A), VRAM_ENOTALLOC);
        after = stats_of(p);
        assert_memory_equal(&before, &after, sizeof before);
        vram_block_info bi;
        assert_int_equal(vram_pool_block_info(p, keep, &bi), 0);
        assert_int_equal(bi.requested, 3000);

        /* A double free, right after the free and after more traffic. */
        free_ok(p, x, STREAM_A);
        before = stats_of(p);
        assert_int_equal(vram_pool_free(p, x, STREAM_A), VRAM_ENOTALLOC);
        assert_int_equal(vram_pool_free(p, x, STREAM_B), VRAM_ENOTALLOC);
        after = stats_of(p);
        assert_memory_equal(&before, &after, sizeof before);
        assert_int_equal(vram_pool_block_info(p, x, &bi), VRAM_ENOTALLOC);
        void *y = alloc_ok(p, 100 * KiB, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, STREAM_B);
        free_ok(p, y, STREAM_B);
        before = stats_of(p);
        assert_int_equal(vram_pool_free(p, y, STREAM_B), VRAM_ENOTALLOC);
        after = stats_of(p);
        assert_memory_equal(&before, &after, sizeof before);
        assert_int_equal(after.live_blocks, 1);
        assert_int_equal(after.frees_total, 2);

        free_ok(p, keep, STREAM_A);
        destroy_ok(p, b);
    }
}

static void test_destroy_busy(void **state)
{
    (void)state;
    for (size_t i = 0; i < 2; i++) {
        vram_backend *b = sim_new(1 * GiB, 2 * MiB);
        vram_pool_opts o = opts_for(b, policies[i], 0);
        vram_pool *p = pool_new(&o);
        void *ptrs[7];
        for (int k = 0; k < 7; k++)
            ptrs[k] = alloc_ok(p, (uint64_t)(k + 1) * 1000, VRAM_OWNER_DEFAULT, VRAM_KIND_IO,
                               STREAM_A);
        vram_pool_stats before = stats_of(p);
        vram_clear_error();
        assert_int_equal(vram_pool_destroy(p), VRAM_EBUSY);
        if (!strstr(vram_last_error(), "7"))
            fail_msg("destroy message does not name the 7 live blocks: \"%s\"",
                     vram_last_error());
        /* The backend refuses to go while the pool uses it. */
        assert_int_equal(vram_backend_destroy(b), VRAM_EBUSY);
        /* Nothing changed: the pool still works. */
        vram_pool_stats after = stats_of(p);
        assert_memory_equal(&before, &after, sizeof before);
        vram_block_info bi;
        for (int k = 0; k < 7; k++) {
            assert_int_equal(vram_pool_block_info(p, ptrs[k], &bi), 0);
            assert_int_equal(bi.requested, (uint64_t)(k + 1) * 1000);
        }
        void *extra = alloc_ok(p, 1 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, STREAM_A);
        free_ok(p, extra, STREAM_A);
        for (int k = 0; k < 6; k++)
            free_ok(p, ptrs[k], STREAM_A);
        assert_int_equal(vram_pool_destroy(p), VRAM_EBUSY);
        free_ok(p, ptrs[6], STREAM_A);
        destroy_ok(p, b);
    }
}

/* ---- statistics ------------------------------------------------------------ */

static void test_stats_exact(void **state)
{
    (void)state;
    for (unsigned i = 0; i < VRAM_HIST_BUCKETS - 1; i++)
        assert_int_equal(vram_hist_bucket_limit(i), 256ull << i);
    assert_int_equal(vram_hist_bucket_limit(VRAM_HIST_BUCKETS - 1), UINT64_MAX);

    for (size_t i = 0; i < 2; i++) {
        vram_backend *b = sim_new(4 * GiB, 2 * MiB);
        vram_pool_opts o = opts_for(b, policies[i], 0);
        vram_pool *p = pool_new(&o);
        vram_owner ow[2];
        assert_int_equal(vram_owner_create(p, "alpha", 0, &ow[0]), 0);
        assert_int_equal(vram_owner_create(p, "beta", 0, &ow[1]), 0);
        enum { N = 12 };
        const uint64_t sizes[N] = {1,   256,     257,      1000,        4096,       65536,
                                   65537, 1 * MiB, 3 * MiB + 1, 12 * MiB, 3 * GiB / 4,
                                   11 * MiB + 5 /* segments: 12 MiB segment, 1 MiB tail */};
        const vram_kind kinds[N] = {VRAM_KIND_WEIGHTS, VRAM_KIND_IO,       VRAM_KIND_IO,
                                    VRAM_KIND_FRAMES,  VRAM_KIND_DECODER,  VRAM_KIND_OTHER,
                                    VRAM_KIND_WEIGHTS, VRAM_KIND_WORKSPACE, VRAM_KIND_ACTIVATIONS,
                                    VRAM_KIND_ACTIVATIONS, VRAM_KIND_WEIGHTS, VRAM_KIND_IO};
        void *ptrs[N];
        int live[N];
        uint64_t peak = 0;
        for (int k = 0; k < N; k++) {
            ptrs[k] = alloc_ok(p, sizes[k], ow[k % 2], kinds[k], k % 3 ? STREAM_A : STREAM_B);
            live[k] = 1;
        }
        for (int round = 0; round < 3; round++) {
            uint64_t live_bytes = 0, alloc_bytes = 0, n_live = 0, frees = 0;
            uint64_t o_live[2] = {0}, o_blocks[2] = {0}, o_allocs[2] = {0}, o_frees[2] = {0};
            uint64_t k_live[VRAM_KIND_COUNT] = {0}, k_blocks[VRAM_KIND_COUNT] = {0};
            uint64_t k_allocs[VRAM_KIND_COUNT] = {0}, k_frees[VRAM_KIND_COUNT] = {0};
            uint64_t h_allocs[VRAM_HIST_BUCKETS] = {0}, h_live[VRAM_HIST_BUCKETS] = {0};
            for (int k = 0; k < N; k++) {
                o_allocs[k % 2]++;
                k_allocs[kinds[k]]++;
                h_allocs[bucket_of(sizes[k])]++;
                if (!live[k]) {
                    frees++;
                    o_frees[k % 2]++;
                    k_frees[kinds[k]]++;
                    continue;
                }
                vram_block_info bi;
                assert_int_equal(vram_pool_block_info(p, ptrs[k], &bi), 0);
                assert_int_equal(bi.requested, sizes[k]);
                assert_int_equal(bi.owner, ow[k % 2]);
                assert_int_equal(bi.kind, kinds[k]);
                assert_ptr_equal(bi.stream, k % 3 ? STREAM_A : STREAM_B);
                assert_true(bi.size >= sizes[k]);
                assert_int_equal(bi.size % 256, 0);
                live_bytes += sizes[k];
                alloc_bytes += bi.size;
                n_live++;
                o_live[k % 2] += sizes[k];
                o_blocks[k % 2]++;
                k_live[kinds[k]] += sizes[k];
                k_blocks[kinds[k]]++;
                h_live[bucket_of(sizes[k])]++;
            }
            if (round == 0)
                peak = live_bytes;
            vram_pool_stats st = stats_of(p);
            assert_int_equal(st.live_bytes, live_bytes);
            assert_int_equal(st.peak_live_bytes, peak);
            assert_int_equal(st.allocated_bytes, alloc_bytes);
            assert_int_equal(st.live_blocks, n_live);
            assert_int_equal(st.allocs_total, N);
            assert_int_equal(st.frees_total, frees);
            assert_int_equal(st.failed_allocs_total, 0);
            assert_true(st.reserved_bytes >= st.allocated_bytes);
            assert_true(st.peak_reserved_bytes >= st.reserved_bytes);
            assert_int_equal(st.reserved_bytes, held_of(b));
            assert_true(st.largest_free_bytes <= st.free_bytes);
            assert_true(st.fragmentation_ratio >= 0.0 && st.fragmentation_ratio <= 1.0);
            if (st.free_bytes == 0)
                assert_true(st.fragmentation_ratio == 0.0);
            else {
                double want = 1.0 - (double)st.largest_free_bytes / (double)st.free_bytes;
                assert_true(st.fragmentation_ratio > want - 1e-9 &&
                            st.fragmentation_ratio < want + 1e-9);
            }
            assert_true(st.backend_calls_total > 0);
            for (unsigned h = 0; h < VRAM_HIST_BUCKETS; h++) {
                if (st.hist_allocs[h] != h_allocs[h] || st.hist_live[h] != h_live[h])
                    fail_msg("round %d bucket %u: allocs %llu (want %llu), live %llu (want %llu)",
                             round, h, (unsigned long long)st.hist_allocs[h],
                             (unsigned long long)h_allocs[h], (unsigned long long)st.hist_live[h],
                             (unsigned long long)h_live[h]);
            }
            for (int w = 0; w < 2; w++) {
                vram_usage_stats u = owner_stats(p, ow[w]);
                assert_int_equal(u.live_bytes, o_live[w]);
                assert_int_equal(u.live_blocks, o_blocks[w]);
                assert_int_equal(u.allocs_total, o_allocs[w]);
                assert_int_equal(u.frees_total, o_frees[w]);
                assert_int_equal(u.failed_allocs_total, 0);
                assert_int_equal(u.budget_bytes, 0);
            }
            vram_usage_stats ud = owner_stats(p, VRAM_OWNER_DEFAULT);
            assert_int_equal(ud.live_bytes, 0);
            assert_int_equal(ud.allocs_total, 0);
            for (int kk = 0; kk < VRAM_KIND_COUNT; kk++) {
                vram_usage_stats u = kind_stats(p, (vram_kind)kk);
                assert_int_equal(u.live_bytes, k_live[kk]);
                assert_int_equal(u.live_blocks, k_blocks[kk]);
                assert_int_equal(u.allocs_total, k_allocs[kk]);
                assert_int_equal(u.frees_total, k_frees[kk]);
            }
            /* Next round: free some. */
            for (int k = round; k < N; k += 3) {
                if (live[k]) {
                    free_ok(p, ptrs[k], k % 3 ? STREAM_A : STREAM_B);
                    live[k] = 0;
                }
            }
        }
        /* Owner peaks: alpha holds the even sizes, beta the odd ones. */
        uint64_t pa = 0, pb = 0;
        for (int k = 0; k < N; k++)
            *(k % 2 ? &pb : &pa) += sizes[k];
        assert_int_equal(owner_stats(p, ow[0]).peak_live_bytes, pa);
        assert_int_equal(owner_stats(p, ow[1]).peak_live_bytes, pb);
        assert_int_equal(kind_stats(p, VRAM_KIND_WEIGHTS).peak_live_bytes,
                         sizes[0] + sizes[6] + sizes[10]);
        /* reset_peaks brings peaks down to the current values. */
        vram_pool_reset_peaks(p);
        vram_pool_stats st = stats_of(p);
        assert_int_equal(st.peak_live_bytes, st.live_bytes);
        assert_int_equal(st.peak_reserved_bytes, st.reserved_bytes);
        for (int k = 0; k < N; k++)
            if (live[k])
                free_ok(p, ptrs[k], k % 3 ? STREAM_A : STREAM_B);
        st = stats_of(p);
        assert_int_equal(st.live_bytes, 0);
        assert_int_equal(st.live_blocks, 0);
        assert_int_equal(st.allocated_bytes, 0);
        assert_int_equal(st.frees_total, N);
        for (unsigned h = 0; h < VRAM_HIST_BUCKETS; h++)
            assert_int_equal(st.hist_live[h], 0);
        destroy_ok(p, b);
    }
}

static void test_trim(void **state)
{
    (void)state;
    for (size_t i = 0; i < 2; i++) {
        vram_backend *b = sim_new(4 * GiB, 2 * MiB);
        vram_pool_opts o = opts_for(b, policies[i], 0);
        o.retain_min = 1 * GiB; /* vmm: keep everything mapped until trimmed */
        vram_pool *p = pool_new(&o);
        void *ptrs[40];
        for (int k = 0; k < 40; k++)
            ptrs[k] = alloc_ok(p, (uint64_t)(k + 1) * (k % 2 ? 777 : 300 * KiB),
                               VRAM_OWNER_DEFAULT, VRAM_KIND_ACTIVATIONS,
                               k % 2 ? STREAM_A : STREAM_B);
        uint64_t released = 12345;
        /* A trim with live blocks returns only free memory and keeps blocks. */
        assert_int_equal(vram_pool_trim(p, &released), 0);
        vram_pool_stats st = stats_of(p);
        assert_true(st.reserved_bytes >= st.allocated_bytes);
        assert_int_equal(st.reserved_bytes, held_of(b));
        assert_int_equal(st.live_blocks, 40);
        for (int k = 0; k < 40; k++)
            free_ok(p, ptrs[k], k % 2 ? STREAM_A : STREAM_B);
        st = stats_of(p);
        assert_true(st.reserved_bytes > 0);
        uint64_t reserved = st.reserved_bytes;
        released = 0;
        assert_int_equal(vram_pool_trim(p, &released), 0);
        st = stats_of(p);
        if (st.reserved_bytes != 0 || held_of(b) != 0)
            fail_msg("%s: after freeing everything and trimming, reserved %llu, held %llu, "
                     "pending %llu",
                     vram_policy_name(policies[i]), (unsigned long long)st.reserved_bytes,
                     (unsigned long long)held_of(b), (unsigned long long)st.pending_bytes);
        assert_int_equal(released, reserved);
        assert_int_equal(st.free_bytes, 0);
        assert_true(st.fragmentation_ratio == 0.0);
        assert_true(st.trims_total >= 2);
        /* Trimming an empty pool is fine, NULL released too. */
        assert_int_equal(vram_pool_trim(p, NULL), 0);
        /* The pool still works after a trim. */
        void *x = alloc_ok(p, 5 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, STREAM_A);
        free_ok(p, x, STREAM_A);
        destroy_ok(p, b);
    }
}

static void test_enomem(void **state)
{
    (void)state;
    for (size_t i = 0; i < 2; i++) {
        vram_backend *b = sim_new(64 * MiB, 2 * MiB);
        vram_pool_opts o = opts_for(b, policies[i], 0);
        o.retain_min = 1 * GiB; /* keep free memory mapped: the pool must give it back itself */
        vram_pool *p = pool_new(&o);
        void *ptr = (void *)(uintptr_t)0xdead;
        vram_clear_error();
        assert_int_equal(vram_pool_alloc(p, 100 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_WEIGHTS,
                                         STREAM_A, &ptr),
                         VRAM_ENOMEM);
        assert_null(ptr);
        const char *msg = vram_last_error();
        if (!strstr(msg, "100") && !strstr(msg, "104857600"))
            fail_msg("out-of-memory message lacks the requested size: \"%s\"", msg);
        vram_pool_stats st = stats_of(p);
        assert_int_equal(st.failed_allocs_total, 1);
        assert_int_equal(st.budget_failures_total, 0);
        assert_int_equal(st.reserved_bytes, held_of(b));

        /* Fill the device with one block, free it on A; a small request on A
         * needs new memory of another size class: the pool must return its
         * free memory to the backend and succeed. */
        void *big = alloc_ok(p, 64 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_WEIGHTS, STREAM_A);
        free_ok(p, big, STREAM_A);
        void *small = alloc_ok(p, 4 * KiB, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, STREAM_A);
        st = stats_of(p);
        assert_true(st.reserved_bytes <= 64 * MiB);
        assert_int_equal(st.reserved_bytes, held_of(b));
        /* Now 64 MiB cannot fit beside the small block. */
        ptr = (void *)(uintptr_t)0xdead;
        assert_int_equal(vram_pool_alloc(p, 64 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_WEIGHTS,
                                         STREAM_A, &ptr),
                         VRAM_ENOMEM);
        assert_null(ptr);
        assert_int_equal(owner_stats(p, VRAM_OWNER_DEFAULT).failed_allocs_total, 2);
        void *mid = alloc_ok(p, 40 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_WEIGHTS, STREAM_A);
        free_ok(p, mid, STREAM_A);
        free_ok(p, small, STREAM_A);
        destroy_ok(p, b);
    }
}

/* ---- snapshot and printing ------------------------------------------------- */

static uint64_t json_u64(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        fail_msg("JSON object lacks \"%s\"", key);
    if (cJSON_IsNumber(v))
        return (uint64_t)v->valuedouble;
    if (cJSON_IsString(v))
        return strtoull(v->valuestring, NULL, 0);
    fail_msg("JSON \"%s\" is neither a number nor a string", key);
    return 0;
}

static void test_snapshot(void **state)
{
    (void)state;
    for (size_t i = 0; i < 2; i++) {
        vram_backend *b = sim_new(4 * GiB, 2 * MiB);
        vram_pool_opts o = opts_for(b, policies[i], 0);
        o.name = "snap";
        vram_pool *p = pool_new(&o);
        vram_owner cam;
        assert_int_equal(vram_owner_create(p, "cam\"quoted\"", 0, &cam), 0);
        enum { N = 9 };
        void *ptrs[N];
        uint64_t sizes[N];
        vram_kind kinds[N];
        vram_owner owners[N];
        vram_stream streams[N];
        for (int k = 0; k < N; k++) {
            sizes[k] = (uint64_t)k * 100003 % (5 * MiB) + 1 + (k == 4 ? 30 * MiB : 0);
            kinds[k] = (vram_kind)(k % VRAM_KIND_COUNT);
            owners[k] = k % 2 ? cam : VRAM_OWNER_DEFAULT;
            streams[k] = k % 2 ? STREAM_A : STREAM_B;
            ptrs[k] = alloc_ok(p, sizes[k], owners[k], kinds[k], streams[k]);
        }
        /* Free two: they must not show as live (pending or free). */
        free_ok(p, ptrs[2], streams[2]);
        free_ok(p, ptrs[5], streams[5]);
        int held[N] = {1, 1, 0, 1, 1, 0, 1, 1, 1};

        vram_buffer sb = {0};
        assert_int_equal(vram_pool_snapshot(p, vram_write_buffer, &sb, 0), 0);
        cJSON *j = parse_json(&sb);
        const char *keys[] = {"pool", "policy", "settings", "segments", "blocks", "owners", "kinds"};
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
            if (!cJSON_HasObjectItem(j, keys[k]))
                fail_msg("snapshot lacks \"%s\"", keys[k]);
        const cJSON *pn = cJSON_GetObjectItemCaseSensitive(j, "pool");
        if (cJSON_IsString(pn))
            assert_string_equal(pn->valuestring, "snap");
        const cJSON *pol = cJSON_GetObjectItemCaseSensitive(j, "policy");
        assert_true(cJSON_IsString(pol));
        assert_string_equal(pol->valuestring, vram_policy_name(policies[i]));
        /* The settings name every option the placement reads. */
        const cJSON *set = cJSON_GetObjectItemCaseSensitive(j, "settings");
        const char *settings[] = {"alignment", "granularity", "pool_limit", "decay_ms", "retain_min",
                                  "place_candidates", "small_size", "large_round", "map_chunk",
                                  "huge_size", "capacity"};
        for (size_t k = 0; k < sizeof settings / sizeof *settings; k++)
            if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(set, settings[k])))
                fail_msg("snapshot settings lack \"%s\"", settings[k]);
        const cJSON *blocks = cJSON_GetObjectItemCaseSensitive(j, "blocks");
        assert_true(cJSON_IsArray(blocks));
        assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "segments")) ||
                    cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "segments")));
        int seen[N] = {0};
        int n_live = 0;
        const cJSON *blk;
        cJSON_ArrayForEach(blk, blocks)
        {
            const cJSON *addr = cJSON_GetObjectItemCaseSensitive(blk, "address");
            assert_true(cJSON_IsString(addr));
            assert_true(strncmp(addr->valuestring, "0x", 2) == 0);
            uint64_t a = strtoull(addr->valuestring, NULL, 16);
            const char *fields[] = {"size", "requested", "owner", "kind", "state", "stream"};
            for (size_t f = 0; f < sizeof fields / sizeof *fields; f++)
                if (!cJSON_HasObjectItem(blk, fields[f]))
                    fail_msg("snapshot block %s lacks \"%s\"", addr->valuestring, fields[f]);
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(blk, "state");
            assert_true(cJSON_IsString(st));
            const char *s = st->valuestring;
            if (strcmp(s, "live") && strcmp(s, "pending") && strcmp(s, "free"))
                fail_msg("block state \"%s\"", s);
            if (strcmp(s, "live"))
                continue;
            n_live++;
            int found = -1;
            for (int k = 0; k < N; k++)
                if ((uint64_t)(uintptr_t)ptrs[k] == a)
                    found = k;
            if (found < 0 || !held[found])
                fail_msg("snapshot shows live block %s that the test does not hold",
                         addr->valuestring);
            assert_int_equal(seen[found], 0);
            seen[found] = 1;
            assert_int_equal(json_u64(blk, "requested"), sizes[found]);
            vram_block_info bi;
            assert_int_equal(vram_pool_block_info(p, ptrs[found], &bi), 0);
            assert_int_equal(json_u64(blk, "size"), bi.size);
            const cJSON *on = cJSON_GetObjectItemCaseSensitive(blk, "owner");
            assert_true(cJSON_IsString(on));
            assert_string_equal(on->valuestring, vram_owner_name(p, owners[found]));
            const cJSON *kn = cJSON_GetObjectItemCaseSensitive(blk, "kind");
            assert_true(cJSON_IsString(kn));
            assert_string_equal(kn->valuestring, vram_kind_name(kinds[found]));
            assert_int_equal(json_u64(blk, "stream"), (uint64_t)(uintptr_t)streams[found]);
        }
        for (int k = 0; k < N; k++)
            if (held[k] && !seen[k])
                fail_msg("live block %d (%p) missing from the snapshot", k, ptrs[k]);
        assert_int_equal(n_live, 7);
        cJSON_Delete(j);
        vram_buffer_free(&sb);

        /* Statistics: JSON parses, text is not empty. */
        assert_int_equal(vram_pool_stats_print(p, vram_write_buffer, &sb, 1), 0);
        j = parse_json(&sb);
        assert_true(cJSON_IsObject(j));
        cJSON_Delete(j);
        vram_buffer_free(&sb);
        assert_int_equal(vram_pool_stats_print(p, vram_write_buffer, &sb, 0), 0);
        assert_true(sb.len > 0);
        assert_non_null(strstr(sb.data, "live_bytes"));
        vram_buffer_free(&sb);

        for (int k = 0; k < N; k++)
            if (held[k])
                free_ok(p, ptrs[k], streams[k]);
        /* Empty pool: the snapshot has no live block. */
        assert_int_equal(vram_pool_snapshot(p, vram_write_buffer, &sb, 0), 0);
        j = parse_json(&sb);
        cJSON_ArrayForEach(blk, cJSON_GetObjectItemCaseSensitive(j, "blocks"))
        {
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(blk, "state");
            assert_true(cJSON_IsString(st));
            assert_string_not_equal(st->valuestring, "live");
        }
        cJSON_Delete(j);
        vram_buffer_free(&sb);
        destroy_ok(p, b);
    }
}

static int failing_write(void *ctx, const char *data, size_t len)
{
    (void)data;
    (void)len;
    int *calls = ctx;
    (*calls)++;
    return VRAM_EIO;
}

static void test_print_writer_error(void **state)
{
    (void)state;
    vram_backend *b = sim_new(1 * GiB, 2 * MiB);
    vram_pool_opts o = opts_for(b, VRAM_POLICY_VMM, 0);
    vram_pool *p = pool_new(&o);
    void *x = alloc_ok(p, 1000, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, STREAM_A);
    int calls = 0;
    assert_int_equal(vram_pool_snapshot(p, failing_write, &calls, 0), VRAM_EIO);
    assert_true(calls >= 1);
    calls = 0;
    assert_int_equal(vram_pool_stats_print(p, failing_write, &calls, 1), VRAM_EIO);
    calls = 0;
    assert_int_equal(vram_pool_stats_print(p, failing_write, &calls, 0), VRAM_EIO);
    assert_int_equal(calls, 1); /* aborts at the first error */
    free_ok(p, x, STREAM_A);
    destroy_ok(p, b);
}

/* ---- the cross-stream rule --------------------------------------------------- */

static void test_cross_stream(void **state)
{
    (void)state;
    for (size_t i = 0; i < 2; i++) {
        vram_backend *b = sim_new(4 * MiB, 2 * MiB);
        vram_pool_opts o = opts_for(b, policies[i], 0);
        o.segment_small = 2 * MiB;
        o.segment_medium = 2 * MiB;
        vram_pool *p = pool_new(&o);
        const char *pol = vram_policy_name(policies[i]);
        void *x = alloc_ok(p, 2 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_ACTIVATIONS, STREAM_A);
        void *y = alloc_ok(p, 2 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_ACTIVATIONS, STREAM_A);
        assert_int_equal(held_of(b), 4 * MiB);
        free_ok(p, x, STREAM_A);

        void *z = (void *)(uintptr_t)0xdead;
        int rc = vram_pool_alloc(p, 2 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_ACTIVATIONS, STREAM_B,
                                 &z);
        if (rc != VRAM_ENOMEM)
            fail_msg("%s: B got %p (%s) while X=%p is pending on A", pol, z, vram_err_name(rc), x);
        assert_null(z);
        vram_pool_stats st = stats_of(p);
        assert_int_equal(st.pending_bytes, 2 * MiB);

        free_ok(p, y, STREAM_A); /* an operation on A: X's event completes */
        void *z1 = NULL;
        rc = vram_pool_alloc(p, 2 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_ACTIVATIONS, STREAM_B, &z1);
        if (rc)
            fail_msg("%s: B cannot reuse X after A moved on: %s: %s", pol, vram_err_name(rc),
                     vram_last_error());
        /* z1 must not overlap Y, which is still pending on A. */
        uintptr_t zy = (uintptr_t)z1, yy = (uintptr_t)y;
        assert_true(zy + 2 * MiB <= yy || yy + 2 * MiB <= zy);

        z = (void *)(uintptr_t)0xdead;
        rc = vram_pool_alloc(p, 2 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_ACTIVATIONS, STREAM_B, &z);
        if (rc != VRAM_ENOMEM)
            fail_msg("%s: B got %p (%s) while Y=%p is pending on A", pol, z, vram_err_name(rc), y);
        assert_null(z);

        void *w = NULL;
        rc = vram_pool_alloc(p, 2 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_ACTIVATIONS, STREAM_A, &w);
        if (rc)
            fail_msg("%s: A cannot reuse Y, freed on A: %s: %s", pol, vram_err_name(rc),
                     vram_last_error());
        st = stats_of(p);
        assert_int_equal(st.live_blocks, 2);
        assert_int_equal(st.failed_allocs_total, 2);
        assert_int_equal(st.reserved_bytes, 4 * MiB);
        assert_int_equal(st.event_waits_total, 0); /* nothing waits on a modelled event */
        /* A trim synchronises: what A freed last is then B's to take. */
        free_ok(p, w, STREAM_A);
        z = (void *)(uintptr_t)0xdead;
        rc = vram_pool_alloc(p, 2 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_ACTIVATIONS, STREAM_B, &z);
        if (rc != VRAM_ENOMEM)
            fail_msg("%s: B got %p (%s) while W=%p is pending on A", pol, z, vram_err_name(rc), w);
        uint64_t released = 0;
        assert_int_equal(vram_pool_trim(p, &released), 0);
        st = stats_of(p);
        assert_int_equal(st.pending_bytes, 0);
        assert_int_equal(st.live_blocks, 1);
        z = NULL;
        rc = vram_pool_alloc(p, 2 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_ACTIVATIONS, STREAM_B, &z);
        if (rc)
            fail_msg("%s: B cannot allocate after a trim completed A's frees: %s: %s", pol,
                     vram_err_name(rc), vram_last_error());
        free_ok(p, z, STREAM_B);
        free_ok(p, z1, STREAM_B);
        destroy_ok(p, b);
    }
}

/* ---- configuration and errors ------------------------------------------------- */

static void test_config(void **state)
{
    (void)state;
    const vram_config *cfg = vram_config_get();
    assert_non_null(cfg);
    uint64_t gran0 = cfg->granularity;
    assert_int_equal(vram_config_set("granularity", "4MiB"), 0);
    assert_int_equal(vram_config_get()->granularity, 4 * MiB);
    assert_int_equal(vram_config_set("GRANULARITY", "8M"), 0);
    assert_int_equal(vram_config_get()->granularity, 8 * MiB);
    assert_int_equal(vram_config_set("granularity", "4MiB"), 0);

    assert_int_equal(vram_config_set("granularity", "4 parsecs"), VRAM_EINVAL);
    assert_true(strlen(vram_last_error()) > 0);
    assert_int_equal(vram_config_get()->granularity, 4 * MiB);
    assert_int_equal(vram_config_set("granularity", "-2MiB"), VRAM_EINVAL);
    assert_int_equal(vram_config_set("granularity", ""), VRAM_EINVAL);
    assert_int_equal(vram_config_get()->granularity, 4 * MiB);
    assert_int_equal(vram_config_set("no_such_option", "1"), VRAM_EINVAL);
    assert_int_equal(vram_config_set("policy", "nonsense"), VRAM_EINVAL);
    assert_int_equal(vram_config_set("decay_ms", "-1"), VRAM_EINVAL);

    /* A sim backend created without a granularity takes the configured one. */
    vram_backend *b = NULL;
    assert_int_equal(vram_backend_create("sim", &(vram_backend_opts){.capacity = 1 * GiB}, &b), 0);
    vram_backend_stats bs;
    vram_backend_stats_get(b, &bs);
    assert_int_equal(bs.granularity, 4 * MiB);
    assert_int_equal(vram_backend_destroy(b), 0);

    vram_buffer sb = {0};
    assert_int_equal(vram_config_print(vram_write_buffer, &sb, 1), 0);
    cJSON *j = parse_json(&sb);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "GRANULARITY");
    assert_non_null(g);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(g, "value");
    assert_true(cJSON_IsString(v));
    assert_string_equal(v->valuestring, "4MiB");
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(g, "source");
    assert_true(cJSON_IsString(src));
    assert_string_equal(src->valuestring, "set");
    cJSON_Delete(j);
    vram_buffer_free(&sb);
    assert_int_equal(vram_config_print(vram_write_buffer, &sb, 0), 0);
    assert_non_null(strstr(sb.data, "VRAM_GRANULARITY"));
    vram_buffer_free(&sb);

    assert_int_equal(vram_config_set("granularity", NULL), 0);
    assert_int_equal(vram_config_set("policy", NULL), 0);
    assert_int_equal(vram_config_set("decay_ms", NULL), 0);
    assert_int_equal(vram_config_get()->granularity, gran0);
}

static void test_errors(void **state)
{
    (void)state;
    int n = 0;
#define CHECK_ERROR(name, value, text)                                                             \
    do {                                                                                           \
        assert_int_equal(VRAM_##name, value);                                                      \
        assert_string_equal(vram_strerror(value), text);                                           \
        assert_string_equal(vram_err_name(value), "VRAM_" #name);                                  \
        n++;                                                                                       \
    } while (0);
    VRAM_ERRORS(CHECK_ERROR)
#undef CHECK_ERROR
    assert_int_equal(n, 12);
    assert_non_null(vram_strerror(-999));
    assert_non_null(vram_err_name(-999));
    assert_non_null(vram_strerror(5));
    vram_clear_error();
    assert_string_equal(vram_last_error(), "");

    for (int k = 0; k < VRAM_KIND_COUNT; k++) {
        const char *nm = vram_kind_name((vram_kind)k);
        assert_non_null(nm);
        vram_kind back = VRAM_KIND_COUNT;
        assert_int_equal(vram_kind_parse(nm, &back), 0);
        assert_int_equal(back, k);
    }
    assert_string_equal(vram_kind_name(VRAM_KIND_WEIGHTS), "weights");
    assert_string_equal(vram_kind_name(VRAM_KIND_DECODER), "decoder");
    vram_kind kk;
    assert_int_equal(vram_kind_parse("gravy", &kk), VRAM_EINVAL);
    vram_policy pp;
    assert_int_equal(vram_policy_parse("vmm", &pp), 0);
    assert_int_equal(pp, VRAM_POLICY_VMM);
    assert_int_equal(vram_policy_parse("segments", &pp), 0);
    assert_int_equal(pp, VRAM_POLICY_SEGMENTS);
    assert_string_equal(vram_policy_name(VRAM_POLICY_VMM), "vmm");
    assert_string_equal(vram_policy_name(VRAM_POLICY_SEGMENTS), "segments");
    assert_int_equal(vram_policy_parse("buddy", &pp), VRAM_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_defaults),
        cmocka_unit_test(test_create_explicit),
        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_owners),
        cmocka_unit_test(test_budgets),
        cmocka_unit_test(test_charges),
        cmocka_unit_test(test_bad_frees),
        cmocka_unit_test(test_destroy_busy),
        cmocka_unit_test(test_stats_exact),
        cmocka_unit_test(test_trim),
        cmocka_unit_test(test_enomem),
        cmocka_unit_test(test_snapshot),
        cmocka_unit_test(test_print_writer_error),
        cmocka_unit_test(test_cross_stream),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
