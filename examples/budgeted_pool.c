/* examples/budgeted_pool.c - a pool with a budget per camera: two owners
 * share one pool, each allocates its frames, one asks for more than its
 * budget and only that request is refused (with the sentence saying why);
 * then the statistics, and everything given back.
 *
 * The pool takes host memory (the "host" backend) so that the example runs
 * anywhere; on a GPU, "vmm" or "cuda" gives device memory the same way.
 *
 *   cc budgeted_pool.c $(pkg-config --cflags --libs vramkit-core) -o budgeted_pool */
#include <stdio.h>
#include <string.h>

#include <vramkit.h>

#define MiB (1024u * 1024u)

/* Print the library's sentence for a failed call and return 1. */
static int failed(const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %s\n", what, vram_err_name(rc), vram_last_error());
    return 1;
}

int main(void)
{
    vram_backend *backend;
    int rc = vram_backend_create("host", NULL, &backend);
    if (rc)
        return failed("vram_backend_create", rc);

    vram_pool_opts opts;
    vram_pool_opts_init(&opts);
    opts.name = "cameras";
    opts.backend = backend;
    vram_pool *pool;
    if ((rc = vram_pool_create(&opts, &pool))) {
        vram_backend_destroy(backend);
        return failed("vram_pool_create", rc);
    }

    /* Each camera may hold 64 MiB at most. */
    vram_owner cam[2];
    const char *names[2] = {"cam01", "cam02"};
    for (int i = 0; i < 2; i++)
        if ((rc = vram_owner_create(pool, names[i], 64 * MiB, &cam[i])))
            return failed("vram_owner_create", rc);

    /* Three 12 MiB frames each, written to as a decoder would. */
    void *frames[2][3] = {{0}};
    for (int i = 0; i < 2; i++)
        for (int f = 0; f < 3; f++) {
            rc = vram_pool_alloc(pool, 12 * MiB, cam[i], VRAM_KIND_FRAMES, NULL,
                                 &frames[i][f]);
            if (rc)
                return failed("vram_pool_alloc", rc);
            memset(frames[i][f], 0x80, 12 * MiB);
        }

    /* cam01 asks for 40 MiB more: over its budget, so only it is refused. */
    void *big = NULL;
    rc = vram_pool_alloc(pool, 40 * MiB, cam[0], VRAM_KIND_FRAMES, NULL, &big);
    if (rc != VRAM_EBUDGET) {
        fprintf(stderr, "expected the budget to refuse 40 MiB for cam01, got %s\n",
                vram_err_name(rc));
        return 1;
    }
    printf("refused as it should be: %s\n", vram_last_error());
    /* cam02 is not affected. */
    void *extra = NULL;
    if ((rc = vram_pool_alloc(pool, 8 * MiB, cam[1], VRAM_KIND_FRAMES, NULL, &extra)))
        return failed("vram_pool_alloc (cam02)", rc);

    vram_usage_stats u;
    for (int i = 0; i < 2; i++) {
        if ((rc = vram_owner_stats_get(pool, cam[i], &u)))
            return failed("vram_owner_stats_get", rc);
        printf("%s: %llu MiB live of a %llu MiB budget\n", names[i],
               (unsigned long long)(u.live_bytes / MiB), (unsigned long long)(u.budget_bytes / MiB));
    }
    if ((rc = vram_pool_stats_print(pool, vram_write_stdio, stdout, 0)))
        return failed("vram_pool_stats_print", rc);

    /* Give everything back; freeing a block twice is refused, not a crash. */
    for (int i = 0; i < 2; i++)
        for (int f = 0; f < 3; f++)
            if ((rc = vram_pool_free(pool, frames[i][f], NULL)))
                return failed("vram_pool_free", rc);
    if ((rc = vram_pool_free(pool, extra, NULL)))
        return failed("vram_pool_free", rc);
    if (vram_pool_free(pool, extra, NULL) != VRAM_ENOTALLOC)
        return failed("a second free of one block was not refused", VRAM_EINVAL);
    if ((rc = vram_pool_destroy(pool)))
        return failed("vram_pool_destroy", rc);
    if ((rc = vram_backend_destroy(backend)))
        return failed("vram_backend_destroy", rc);
    printf("budgeted_pool: done\n");
    return 0;
}
