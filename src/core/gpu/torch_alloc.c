/* src/core/gpu/torch_alloc.c - PyTorch's pluggable CUDA allocator (see
 * vramkit/torch.h): per CUDA device one opened device, one GPU backend and one
 * pool, set up by the first allocation on that device under a lock and then
 * published through an atomic pointer, so that every later allocation and free
 * is a single pool call. A failed set-up is remembered with its sentence and
 * repeated, never retried: a process without a usable GPU fails the same way
 * each time. The pool keeps more memory mapped than a plain pool does (see
 * torch_memory_defaults). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "base/json_out.h"
#include "vramkit/log.h"
#include "vramkit/backend.h"
#include "vramkit/config.h"
#include "vramkit/device.h"
#include "vramkit/pool.h"
#include "vramkit/stats.h"
#include "vramkit/torch.h"

typedef struct torch_slot {
    _Atomic(vram_pool *) pool; /* published (release) once set up; never cleared */
    vram_device *dev;          /* written before `pool` is published */
    vram_backend *backend;
    uint64_t decay_ms;         /* the pool's, as set up */
    int rc;                    /* the set-up failure, 0 if none (under setup_lock) */
    char error[512];           /* its sentence */
} torch_slot;

static torch_slot slots[VRAM_TORCH_DEVICES];
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;

/* The choice list of every option, by option name (so VRAM_BACKEND's index
 * maps to its name whatever the order of the list in config.h). */
static const struct {
#define CHOICES_MEMBER(NAME, field, TYPE, def, choices, help) const char *NAME;
    VRAM_OPTIONS(CHOICES_MEMBER)
#undef CHOICES_MEMBER
} option_choices = {
#define CHOICES_VALUE(NAME, field, TYPE, def, choices, help) choices,
    VRAM_OPTIONS(CHOICES_VALUE)
#undef CHOICES_VALUE
};

/* The backend PyTorch's memory comes from: VRAM_BACKEND if it names a GPU
 * backend, else "vmm". */
static const char *torch_backend_name(void)
{
    static const char *const gpu[] = {"cuda", "cuda_async", "vmm"};
    const char *p = option_choices.BACKEND;
    for (int i = 0; i < vram_config_get()->backend && p; i++) {
        p = strchr(p, '|');
        if (p)
            p++;
    }
    size_t n = p ? strcspn(p, "|") : 0;
    for (size_t i = 0; i < VRAM__ARRAY_LEN(gpu); i++)
        if (n == strlen(gpu[i]) && !strncmp(p, gpu[i], n))
            return gpu[i];
    vram_log(VRAM_LOG_INFO, "VRAM_BACKEND is \"%.*s\", not a GPU backend: PyTorch's memory "
                             "comes from vmm", (int)n, p ? p : "");
    return "vmm";
}

/* The configured policy if the backend can serve it, else the one it can. */
static vram_policy torch_policy(vram_policy wanted, unsigned caps)
{
    if (wanted == VRAM_POLICY_VMM && !(caps & VRAM_BACKEND_MAP))
        return VRAM_POLICY_SEGMENTS;
    if (wanted == VRAM_POLICY_SEGMENTS && !(caps & VRAM_BACKEND_SEGMENTS))
        return VRAM_POLICY_VMM;
    return wanted;
}

/* Open device, backend and pool for `device` into `s`. On error everything
 * opened is closed again and the last error holds the sentence. */
static int setup_device(int device, torch_slot *s, vram_pool **out)
{
    vram_device *dev = NULL;
    vram_backend *backend = NULL;
    vram_pool *pool = NULL;
    const char *bname = torch_backend_name();
    int rc = vram_device_open(device, NULL, &dev);
    if (!rc) {
        vram_backend_opts bo = {.device = dev};
        rc = vram_backend_create(bname, &bo, &backend);
    }
    if (!rc) {
        vram_pool_opts po;
        if (vram_pool_opts_init(&po))
            vram_log(VRAM_LOG_WARN, "PyTorch allocator on device %d: %s (its default is used)",
                      device, vram_last_error());
        char name[32];
        snprintf(name, sizeof name, "torch:%d", device);
        po.name = name; /* the pool copies it */
        po.backend = backend;
        po.policy = torch_policy(po.policy, vram_backend_caps(backend));
        s->decay_ms = po.decay_ms;
        rc = vram_pool_create(&po, &pool);
    }
    if (rc) {
        vram__saved_error err;
        vram__fail_prefix(rc, "PyTorch allocator on device %d (backend %s): ", device, bname);
        vram__error_save(&err);
        if (backend)
            vram_backend_destroy(backend);
        if (dev)
            vram_device_close(dev);
        return vram__error_restore(&err, rc);
    }
    s->dev = dev;
    s->backend = backend;
    vram_log(VRAM_LOG_INFO, "PyTorch allocator on device %d: pool \"%s\", backend %s, policy %s",
              device, vram_pool_name(pool), vram_backend_name(backend),
              vram_policy_name(vram_pool_policy(pool)));
    *out = pool;
    return 0;
}

/* The slow path of the first allocation on a device: set it up once. Returns
 * the pool, or NULL with the (remembered) failure as the last error. */
static vram_pool *torch_setup(int device)
{
    torch_slot *s = &slots[device];
    char msg[sizeof s->error];
    pthread_mutex_lock(&setup_lock);
    vram_pool *pool = atomic_load_explicit(&s->pool, memory_order_relaxed);
    if (!pool && !s->rc) {
        int rc = setup_device(device, s, &pool);
        if (rc) {
            s->rc = rc;
            snprintf(s->error, sizeof s->error, "%s", vram_last_error());
        } else {
            atomic_store_explicit(&s->pool, pool, memory_order_release);
        }
    }
    int rc = s->rc;
    snprintf(msg, sizeof msg, "%s", s->error);
    pthread_mutex_unlock(&setup_lock);
    if (!pool)
        vram__fail(rc, "%s", msg);
    return pool;
}

void *vram_torch_malloc(ssize_t size, int device, void *stream)
{
    if (VRAM__UNLIKELY(size == 0))
        return NULL;
    if (VRAM__UNLIKELY(device < 0 || device >= VRAM_TORCH_DEVICES)) {
        vram__fail(VRAM_EINVAL, "PyTorch allocator: device %d is out of range (0..%d)", device,
                   VRAM_TORCH_DEVICES - 1);
        vram_log(VRAM_LOG_ERROR, "%s", vram_last_error());
        return NULL;
    }
    vram_pool *pool = atomic_load_explicit(&slots[device].pool, memory_order_acquire);
    void *ptr = NULL;
    if (VRAM__UNLIKELY(!pool) && !(pool = torch_setup(device))) {
        vram_log(VRAM_LOG_ERROR, "PyTorch's allocation of %zd bytes on device %d failed: %s",
                  size, device, vram_last_error());
        return NULL;
    }
    /* PyTorch passes a size_t: a "negative" size is a huge request the pool refuses. */
    if (VRAM__UNLIKELY(vram_pool_alloc(pool, (uint64_t)(size_t)size, VRAM_OWNER_DEFAULT,
                                       VRAM_KIND_OTHER, stream, &ptr))) {
        vram_log(VRAM_LOG_ERROR, "PyTorch's allocation of %zu bytes on device %d failed: %s",
                  (size_t)size, device, vram_last_error());
        return NULL;
    }
    return ptr;
}

void vram_torch_free(void *ptr, ssize_t size, int device, void *stream)
{
    (void)size;
    if (!ptr)
        return;
    vram_pool *pool = device >= 0 && device < VRAM_TORCH_DEVICES
                          ? atomic_load_explicit(&slots[device].pool, memory_order_acquire)
                          : NULL;
    if (VRAM__UNLIKELY(!pool)) {
        vram__fail(VRAM_ENOTALLOC, "PyTorch freed %p on device %d, where vramkit has no pool",
                   ptr, device);
        vram_log(VRAM_LOG_ERROR, "%s", vram_last_error());
        return;
    }
    if (VRAM__UNLIKELY(vram_pool_free(pool, ptr, stream)))
        vram_log(VRAM_LOG_ERROR, "PyTorch's free of %p on device %d failed: %s", ptr, device,
                  vram_last_error());
}

/* Why `device` has no pool (call with setup_lock not held). */
static void no_pool_reason(int device, char *buf, size_t cap)
{
    pthread_mutex_lock(&setup_lock);
    if (slots[device].rc)
        snprintf(buf, cap, "%s", slots[device].error);
    else
        snprintf(buf, cap, "PyTorch has not allocated on device %d through vramkit yet", device);
    pthread_mutex_unlock(&setup_lock);
}

static void add_ready_fields(vram__json *j, torch_slot *s, vram_pool *pool,
                             const vram_pool_stats *st)
{
    vram__json_str(j, "pool", vram_pool_name(pool));
    vram__json_str(j, "backend", vram_backend_name(s->backend));
    vram__json_str(j, "policy", vram_policy_name(vram_pool_policy(pool)));
    vram__json_u64(j, "decay_ms", s->decay_ms); /* the limit is among the statistics */
#define ADD_U64(field) vram__json_u64(j, #field, st->field)
#define ADD_F64(field) vram__json_f64(j, #field, st->field)
#define ADD_STAT(field, type, help) ADD_##type(field);
    VRAM_POOL_STATS(ADD_STAT)
#undef ADD_STAT
#undef ADD_F64
#undef ADD_U64
    vram_backend_stats bs;
    vram_backend_stats_get(s->backend, &bs);
    vram__json_u64(j, "backend_held_bytes", bs.held_bytes);
    vram__json_u64(j, "backend_peak_held_bytes", bs.peak_held_bytes);
    vram__json_u64(j, "backend_granularity_bytes", bs.granularity);
    vram_device_info info;
    if (vram_device_info_get(s->dev, &info) == 0) {
        vram__json_str(j, "device_name", info.name);
        vram__json_u64(j, "device_total_bytes", info.total_bytes);
        vram__json_u64(j, "device_free_bytes", info.free_bytes);
        vram__json_u64(j, "stack_limit_bytes", info.stack_limit);
    } else {
        vram__json_str(j, "device_error", vram_last_error());
    }
}

int vram_torch_stats_json(int device, char *buf, size_t cap)
{
    if (!buf && cap)
        return vram__fail(VRAM_EINVAL, "vram_torch_stats_json: buf is NULL but cap is %zu", cap);
    if (cap)
        buf[0] = '\0';
    if (device < 0 || device >= VRAM_TORCH_DEVICES)
        return vram__fail(VRAM_EINVAL, "vram_torch_stats_json: device %d is out of range (0..%d)",
                          device, VRAM_TORCH_DEVICES - 1);
    torch_slot *s = &slots[device];
    vram_pool *pool = atomic_load_explicit(&s->pool, memory_order_acquire);
    vram_pool_stats st;
    if (pool) {
        int rc = vram_pool_stats_get(pool, &st);
        if (rc)
            return rc;
    }
    vram_buffer text = {0};
    vram__json j;
    vram__json_begin(&j, &text);
    vram__json_object(&j, NULL);
    vram__json_i64(&j, "device", device);
    vram__json_bool(&j, "ready", pool != NULL);
    if (pool) {
        add_ready_fields(&j, s, pool, &st);
    } else {
        char why[sizeof s->error];
        no_pool_reason(device, why, sizeof why);
        vram__json_str(&j, "error", why);
    }
    vram__json_end(&j);
    int rc = vram__json_done(&j);
    if (rc) {
        vram_buffer_free(&text);
        return vram__fail_prefix(rc, "the statistics of device %d: ", device);
    }
    size_t need = text.len + 1;
    if (need > cap) {
        vram_buffer_free(&text);
        return vram__fail(VRAM_ELIMIT,
                          "the statistics of device %d need a buffer of %zu bytes; it has %zu",
                          device, need, cap);
    }
    memcpy(buf, text.data, need);
    vram_buffer_free(&text);
    return 0;
}

int vram_torch_reset_peaks(int device)
{
    vram_pool *pool = vram_torch_pool(device);
    if (!pool) {
        if (device < 0 || device >= VRAM_TORCH_DEVICES)
            return vram__fail(VRAM_EINVAL, "vram_torch_reset_peaks: device %d is out of range "
                                           "(0..%d)", device, VRAM_TORCH_DEVICES - 1);
        char why[sizeof slots[0].error];
        no_pool_reason(device, why, sizeof why);
        return vram__fail(VRAM_EINVAL, "no vramkit pool on device %d: %s", device, why);
    }
    vram_pool_reset_peaks(pool);
    return 0;
}

vram_pool *vram_torch_pool(int device)
{
    if (device < 0 || device >= VRAM_TORCH_DEVICES)
        return NULL;
    return atomic_load_explicit(&slots[device].pool, memory_order_acquire);
}
