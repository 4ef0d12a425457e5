/* vramkit/metrics.h - pools, the GPU and the monitor as Prometheus metrics:
 * the text exposition (format 0.0.4) written through a vram_write_fn, and a
 * small HTTP server (libmicrohttpd) that answers /metrics, /snapshot and
 * /healthz, bound to 127.0.0.1 unless told otherwise.
 *
 * Families (every one with HELP and TYPE; counters end in _total):
 *  - vram_pool_<field>{pool} for each field of VRAM_POOL_STATS (stats.h);
 *  - vram_pool_owner_<field>{pool,owner} and vram_pool_kind_<field>{pool,kind}
 *    for each field of VRAM_USAGE_STATS: the pool counts per owner and per
 *    kind (not per pair), and each family sums to the pool's total;
 *    owner budgets only for owners that have one, every kind always;
 *  - vram_pool_size_class_allocs_total{pool,up_to_bytes} and
 *    vram_pool_size_class_live_blocks{pool,up_to_bytes}: the block-size
 *    histogram, one series per class of requested size (up_to_bytes its
 *    upper bound in bytes, "+Inf" for the last; not cumulative, so each
 *    family sums to the pool's count);
 *  - from NVML, when it is there: vram_gpu_info{gpu,name} (1),
 *    vram_gpu_memory_total_bytes, _used_bytes, _free_bytes{gpu},
 *    vram_gpu_processes{gpu} and vram_gpu_process_memory_used_bytes
 *    {gpu,pid,process} (when NVML lists the processes; a process whose usage
 *    NVML does not report is left out); vram_nvml_available says 1 or 0, and
 *    without NVML a comment line gives the reason and the GPU families are
 *    absent: no number is ever made up;
 *  - the monitor's own families (vram_monitor_print_metrics) when one is set.
 * Label values are escaped as the format says (backslash, double quote,
 * newline). Pool names label the series, so two pools of one name are
 * refused (VRAM_EINVAL).
 *
 * HTTP: GET or HEAD; /metrics (text/plain; version=0.0.4), /snapshot (JSON:
 * with ?pool=NAME that pool's vram_pool_snapshot object, 404 for an unknown
 * name; without it a JSON array of every pool's snapshot, in the order they
 * were added), /healthz ("ok", or 503 and why when a health check added with
 * vram_metrics_add_health fails), / (the list of these). Another method gets
 * 405 with an Allow header, another path 404, a request whose header does not
 * fit the connection's memory 431 (a URL 414), a failure while building the
 * page 500 with the sentence. A library built on this one may serve paths of
 * its own on the same server (vram_metrics_route: any method, a body up to
 * max_body_bytes, 413 past it) and add families of its own to /metrics
 * (vram_metrics_add_families). Requests are answered by a pool of threads
 * polling their connections, so a client that stalls half-way through its
 * request holds none of them; it is dropped after timeout_s of silence. At most
 * max_connections are open at once: more wait in the kernel's listen queue
 * until one closes.
 *
 * Errors and ownership: 0 or a negative VRAM_E* code with the sentence in
 * vram_last_error(); *out is NULL on error. The caller stops a server with
 * vram_metrics_stop(), which must not race other calls on it. Pools and the
 * monitor are borrowed: an exposed pool must be removed (or the server
 * stopped) before it is destroyed, and the monitor must outlive the server.
 * The opts' pools array and PCI bus id are copied; the address is read at
 * start only. Requests run on the server's threads and read each pool
 * under its lock; the calls below are thread-safe. */
#ifndef VRAMKIT_METRICS_H
#define VRAMKIT_METRICS_H

#include "vramkit/api.h"

#include <stddef.h>
#include <stdint.h>

#include "vramkit/monitor.h"
#include "vramkit/pool.h"
#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_metrics_opts {
    uint32_t size; /* sizeof(vram_metrics_opts), which vram_metrics_opts_init sets; 0
                      reads as this version. The library reads no
                      further than it says. */
    /* What is exposed. */
    vram_pool *const *pools; /* pools exposed from the start; the array is copied,
                                the pools borrowed */
    size_t n_pools;
    vram_monitor *monitor;   /* its families too; NULL: none. Must outlive the server */
    int gpu;                 /* GPUs read (vramkit/nvml.h): VRAM_GPU_ALL (default),
                                VRAM_GPU_NONE (no NVML call, no GPU families) or
                                an NVML index */
    const char *gpu_pci_bus_id; /* if set, the GPU at this PCI bus id instead
                                   (copied) */
    /* The server. */
    const char *address;     /* IPv4 or IPv6 literal to bind; NULL: VRAM_METRICS_ADDRESS */
    unsigned port;           /* TCP port; 0: a free one, read with vram_metrics_port() */
    unsigned threads;        /* threads answering requests (1..64); 0: 2 */
    unsigned max_connections; /* open connections at most (1..4096); 0: 64 */
    unsigned timeout_s;      /* a connection silent this long is closed; 0: 10 */
    size_t max_header_bytes; /* memory for one connection's request (header
                                included, 4 KiB..1 MiB); 0: 32 KiB */
    size_t max_body_bytes;   /* the largest request body a routed path takes
                                (1 KiB..16 MiB; vram_metrics_route); 0: 64 KiB */
} vram_metrics_opts;

/* Defaults: no pools, no monitor, every GPU (VRAM_METRICS_GPU), the address
 * and port of the VRAM_METRICS_ADDRESS and VRAM_METRICS_PORT options (the
 * address and a PCI bus id point into the configuration: vramkit/config.h).
 * Returns 0 or VRAM_EINVAL when one of those is malformed (the default is
 * kept then) or opts is NULL. */
VRAM_API int vram_metrics_opts_init(vram_metrics_opts *opts);

/* Write the exposition of opts' pools, GPUs and monitor through `write`,
 * without HTTP (the server's settings in opts are ignored). Each pool's
 * statistics are read under its lock, so pools may be in use meanwhile; the
 * text is written afterwards, with no pool's lock held, in many calls of
 * `write` (an error leaves what was written before). flags must be 0.
 * Returns 0, VRAM_EINVAL (NULL arguments, flags, a bad opts.size or gpu, a
 * NULL pool, two pools of one name), VRAM_EHOSTMEM, or the error of the
 * writer or of the monitor. */
VRAM_API int vram_metrics_print(const vram_metrics_opts *opts, vram_write_fn write, void *ctx,
                                unsigned flags);

typedef struct vram_metrics vram_metrics;

/* Bind and start serving. On error *out is NULL and nothing runs:
 * VRAM_EINVAL (a NULL out, a bad address, port above 65535, limits out of
 * range, a NULL or duplicate pool, a bad gpu), VRAM_EIO when the socket
 * cannot be bound or the server not started (the sentence names the
 * address, the port and the reason), VRAM_EHOSTMEM. */
VRAM_API int vram_metrics_start(const vram_metrics_opts *opts, vram_metrics **out);

/* The TCP port the server listens on (the one picked when opts.port was 0);
 * 0 for NULL. */
VRAM_API unsigned vram_metrics_port(const vram_metrics *server);

/* Expose one more pool / stop exposing one. Adding a pool already exposed, or
 * one whose name an exposed pool has, is VRAM_EINVAL; so is removing one not
 * exposed, and NULL arguments; add may also give VRAM_EHOSTMEM. Once remove
 * returns no request touches the pool (it waits for those reading it), so
 * it may be destroyed; a pool must be removed (or the server stopped)
 * before that. Neither may be called from a vram_metrics_write writer. */
VRAM_API int vram_metrics_add_pool(vram_metrics *server, vram_pool *pool);
VRAM_API int vram_metrics_remove_pool(vram_metrics *server, vram_pool *pool);

/* The exposition the server would answer now, through `write`: its own
 * families, then those added with vram_metrics_add_families. The server's
 * lock is held while `write` takes its own families: it must not add or
 * remove pools (it would deadlock). flags must be 0. Returns 0, VRAM_EINVAL
 * (NULL arguments, flags), VRAM_EHOSTMEM, or the error of the writer, of
 * the monitor or of an added families writer. */
VRAM_API int vram_metrics_write(vram_metrics *server, vram_write_fn write, void *ctx,
                                unsigned flags);

/* ---- paths and families of a library built on this one ---- */

/* One request to a routed path, as its handler sees it; valid only while
 * the handler runs (copy what is kept). */
typedef struct vram_http_request {
    const char *method; /* "GET", "HEAD", "POST", "PUT", "DELETE", ... */
    const char *path;   /* the URL's path without its query, percent-decoded,
                           e.g. "/streams/cam1" */
    /* The value of query argument `key` (?key=value, decoded) or of request
     * header `name` (case-insensitive); NULL when absent (and for a query
     * argument without a value, ?key). */
    const char *(*arg)(const struct vram_http_request *req, const char *key);
    const char *(*header)(const struct vram_http_request *req, const char *name);
    const char *body;   /* the request's body, NUL-terminated ("" when none;
                           it may hold NUL bytes: body_len counts them) */
    size_t body_len;
    void *internal;     /* the server's own */
} vram_http_request;

/* The answer a handler fills. It comes zeroed but for status; a HEAD
 * request's answer is sent without its body. */
typedef struct vram_http_response {
    unsigned status;          /* an HTTP status (200..599); 200 unless set */
    const char *content_type; /* NULL: "application/json" */
    char *body;               /* malloc'd text the server frees (also when the
                                 handler fails); NULL: an empty body */
    size_t body_len;          /* its length in bytes; 0: strlen(body) */
    const char *allow;        /* an Allow header (say for a 405), or NULL */
} vram_http_response;

/* Serve one request: read req, fill resp, return 0; or return a negative
 * VRAM_E* code with the sentence in vram_last_error() (vram_set_error),
 * answered 500 as {"error": sentence}. content_type and allow are read
 * once it returns: literals, or strings that live as long as ctx. */
typedef int (*vram_metrics_route_fn)(void *ctx, const vram_http_request *req,
                                     vram_http_response *resp);

/* The most routes, and the most families writers, one server takes. */
#define VRAM_METRICS_ROUTES_MAX 16
#define VRAM_METRICS_FAMILIES_MAX 16
#define VRAM_METRICS_HEALTH_MAX 16

/* Answer every request whose path is `prefix` or starts with `prefix` and a
 * slash ("/streams": /streams, /streams/cam1), whatever its method, with
 * fn(ctx, ...): its body is read first, up to max_body_bytes. A larger one
 * is answered 413 with a sentence and never held past the limit: refused
 * before it is read when its Content-Length says so, read and dropped when
 * sent in chunks (a connection whose chunks go on past 16 times the limit
 * is closed unanswered). A response whose status or headers are malformed
 * is answered 500. The handler runs on a server thread, holding none of
 * the server's locks, and may run on several at once.
 *
 * A prefix is a path of segments ("/a" or "/a/b": no empty segment, no
 * final slash, no '?', '#', '%', space or control character, at most 127
 * bytes); it is copied. *id gets the route's id for vram_metrics_unroute
 * (ids, shared with families writers, are not used twice by a server), 0
 * on error. Returns 0, VRAM_EINVAL (NULL arguments, a malformed prefix,
 * "/" or a prefix at or under one of the server's own paths, a prefix
 * routed already, or at, under or above one routed: prefixes do not nest),
 * VRAM_ELIMIT (VRAM_METRICS_ROUTES_MAX routes already), VRAM_EHOSTMEM. ctx
 * is borrowed until the route is removed (or the server stopped).
 * Thread-safe, also from a handler. */
VRAM_API int vram_metrics_route(vram_metrics *server, const char *prefix,
                                vram_metrics_route_fn fn, void *ctx, uint32_t *id);

/* Stop routing: from now on the route's paths are answered like any other
 * (404, or 405 for a method other than GET and HEAD; a request whose body
 * was being read gets 404), and once this returns none of its handler's
 * calls runs, so ctx may be freed. Returns 0, VRAM_EINVAL (a NULL server,
 * an id that is no route of the server), or VRAM_EBUSY when called from
 * that route's own handler (it would wait for itself). Thread-safe; a
 * handler may unroute another route, though two handlers unrouting each
 * other's routes at the same time would wait for each other for ever. */
VRAM_API int vram_metrics_unroute(vram_metrics *server, uint32_t id);

/* Write complete families (HELP, TYPE and samples, every line ending in a
 * newline) through write(wctx, ...), returning 0 or write's error; another
 * negative VRAM_E* code, with its sentence, fails the scrape (500). */
typedef int (*vram_metrics_families_fn)(void *ctx, vram_write_fn write, void *wctx);

/* Add the families fn writes to the exposition, after the server's own and
 * those added before, on every /metrics request and vram_metrics_write.
 * Their names must be the writer's own (a family named twice makes an
 * exposition Prometheus refuses; nothing checks it). fn runs on a server
 * thread (or vram_metrics_write's caller), with none of the server's locks
 * held, maybe on several at once, and must not add or remove families or
 * routes, nor call vram_metrics_write. *id gets the id for
 * vram_metrics_remove_families (0 on error). Returns 0,
 * VRAM_EINVAL (NULL arguments), VRAM_ELIMIT (VRAM_METRICS_FAMILIES_MAX
 * already), VRAM_EHOSTMEM. ctx is borrowed until removed. Thread-safe. */
VRAM_API int vram_metrics_add_families(vram_metrics *server, vram_metrics_families_fn fn,
                                       void *ctx, uint32_t *id);

/* Take them out of the exposition; waits for the writer's calls in flight,
 * so ctx may be freed once it returns. Returns 0, VRAM_EINVAL (a NULL
 * server, an id that is no families writer of the server), VRAM_EBUSY from
 * that writer itself. Thread-safe. */
VRAM_API int vram_metrics_remove_families(vram_metrics *server, uint32_t id);

/* Say whether what the check watches can serve: 0, or non-zero with a
 * sentence of why not into why (cap bytes). */
typedef int (*vram_metrics_health_fn)(void *ctx, char *why, size_t cap);

/* Add a check to /healthz: it answers 200 "ok" while every check says 0,
 * and 503 "unhealthy: " with each failing check's sentence otherwise (so
 * a liveness probe restarts the process whose GPU is lost). fn runs on a
 * server thread with none of the server's locks held, maybe on several at
 * once, and must answer quickly. *id gets the id for
 * vram_metrics_remove_health (0 on error). Returns 0, VRAM_EINVAL (NULL
 * arguments), VRAM_ELIMIT (VRAM_METRICS_HEALTH_MAX already),
 * VRAM_EHOSTMEM. ctx is borrowed until removed. Thread-safe. */
VRAM_API int vram_metrics_add_health(vram_metrics *server, vram_metrics_health_fn fn, void *ctx,
                                     uint32_t *id);

/* Take a check out; waits for its calls in flight, so ctx may be freed
 * once it returns. Returns 0, VRAM_EINVAL (a NULL server, an id that is
 * no check of the server), VRAM_EBUSY from that check itself. */
VRAM_API int vram_metrics_remove_health(vram_metrics *server, uint32_t id);

/* Write `value` as the text of a Prometheus label value, without the quotes
 * around it: backslash, double quote and newline escaped (\\, \", \n), for
 * families writers. Returns 0, VRAM_EINVAL (a NULL write or value), or the
 * error of write. */
VRAM_API int vram_metrics_write_label_value(vram_write_fn write, void *ctx, const char *value);

/* Stop: close the socket, finish the requests in flight, join the threads
 * and free the server (not the pools, the monitor or the routes' and
 * families' ctx, which stay the caller's; no handler or writer runs once
 * it returns). NULL is accepted. Returns 0. */
VRAM_API int vram_metrics_stop(vram_metrics *server);

#ifdef __cplusplus
}
#endif
#endif
