/* src/observe/http.c - the metrics server: libmicrohttpd answering
 * /metrics, /snapshot, /healthz and / from a pool of threads, and handing
 * the paths a library routes to http_routes.c.
 *
 * libmicrohttpd does the defensive work: its threads poll (epoll) every
 * connection, so a client that sends half a request and stalls costs a
 * socket, not a thread; a connection silent for timeout_s is closed; at most
 * max_connections are open (more wait in the kernel's listen queue until
 * one closes); a request that does not fit a connection's memory is
 * answered 431 (a URL 414) by the library itself. This file dispatches
 * requests, answers the server's own paths and keeps the list of pools; the
 * routes and the families added to /metrics are http_routes.c's.
 *
 * The list is guarded by a read-write lock that a request holds (shared)
 * for as long as it reads pools, so vram_metrics_remove_pool(), which takes
 * it exclusively, returns only once no request touches the removed pool.
 * Writers are preferred, so a stream of scrapes cannot starve a removal. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "base/internal.h"
#include "http_internal.h"
#include "vramkit/log.h"
#include "metrics_internal.h"
#include "prom.h"
#include "vramkit/config.h"
#include "vramkit/stats.h"

struct vram_metrics {
    struct MHD_Daemon *daemon;
    pthread_rwlock_t lock; /* pools: shared by requests, exclusive to add/remove */
    vram_pool **pools;
    size_t n_pools, cap_pools;
    vram_monitor *monitor;
    int gpu;
    char *gpu_pci;
    unsigned port;
    size_t max_body;         /* of a routed request */
    vram__http_hooks *hooks; /* routes and added families (http_routes.c) */
    /* libmicrohttpd's messages while it starts, for the error sentence. */
    pthread_mutex_t log_lock;
    int starting;
    char start_log[256];
};

static const char metrics_type[] = "text/plain; version=0.0.4; charset=utf-8";
static const char text_type[] = "text/plain; charset=utf-8";
static const char json_type[] = "application/json";

static const char index_page[] =
    "vramkit metrics\n"
    "  /metrics            Prometheus text exposition (format 0.0.4)\n"
    "  /snapshot           every pool's snapshot, as a JSON array\n"
    "  /snapshot?pool=NAME one pool's snapshot, as a JSON object\n"
    "  /healthz            ok, or 503 and why when a health check fails\n";

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    vram_metrics *m = cls;
    char line[256];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    pthread_mutex_lock(&m->log_lock);
    if (m->starting && !m->start_log[0])
        snprintf(m->start_log, sizeof m->start_log, "%s", line);
    pthread_mutex_unlock(&m->log_lock);
    vram_log(VRAM_LOG_DEBUG, "metrics server: %s", line);
}

enum MHD_Result vram__http_reply(struct MHD_Connection *c, unsigned status, const char *type,
                                 char *body, size_t len, int owned, const char *allow)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, body, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_MUST_COPY);
    if (!r) {
        if (owned)
            free(body);
        return MHD_NO; /* the connection is closed */
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             char *body, size_t len, int owned)
{
    return vram__http_reply(c, status, type, body, len, owned, NULL);
}

enum MHD_Result vram__http_reply_text(struct MHD_Connection *c, unsigned status, const char *fmt,
                                      ...)
{
    char body[1200];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof body ? (size_t)n : sizeof body - 1;
    return reply(c, status, text_type, body, len, 0);
}

enum MHD_Result vram__http_reply_json_error(struct MHD_Connection *c, unsigned status,
                                            const char *msg)
{
    cJSON *o = cJSON_CreateObject();
    char *text = o && cJSON_AddStringToObject(o, "error", msg) ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text)
        return vram__http_reply_text(c, status, "%s\n", msg);
    /* cJSON's buffer comes from malloc (its default hooks): the response frees it. */
    return reply(c, status, json_type, text, strlen(text), 1);
}

static enum MHD_Result serve_metrics(vram_metrics *m, struct MHD_Connection *c)
{
    vram_buffer b = {0};
    pthread_rwlock_rdlock(&m->lock);
    int rc = vram__metrics_print(m->pools, m->n_pools, m->monitor, m->gpu, m->gpu_pci,
                                 vram_write_buffer, &b);
    pthread_rwlock_unlock(&m->lock);
    /* The added families after the server's own, without its lock. */
    if (!rc)
        rc = vram__http_write_families(m->hooks, vram_write_buffer, &b);
    if (rc) {
        free(b.data);
        return vram__http_reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "metrics: %s\n",
                                     vram_last_error());
    }
    return reply(c, MHD_HTTP_OK, metrics_type, b.data, b.len, 1);
}

/* 200 "ok" while every added health check passes; 503 with their sentences. */
static enum MHD_Result serve_health(vram_metrics *m, struct MHD_Connection *c)
{
    char why[1024];
    if (vram__http_health(m->hooks, why, sizeof why))
        return vram__http_reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "unhealthy: %s\n", why);
    return vram__http_reply_text(c, MHD_HTTP_OK, "ok\n");
}

static enum MHD_Result serve_snapshot(vram_metrics *m, struct MHD_Connection *c)
{
    const char *want = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "pool");
    vram_buffer b = {0};
    int rc = 0, found = 0;
    pthread_rwlock_rdlock(&m->lock);
    if (want) {
        for (size_t i = 0; i < m->n_pools && !found; i++)
            if (strcmp(vram_pool_name(m->pools[i]), want) == 0) {
                found = 1;
                rc = vram_pool_snapshot(m->pools[i], vram_write_buffer, &b, 0);
            }
    } else {
        rc = vram_write_buffer(&b, "[", 1);
        for (size_t i = 0; i < m->n_pools && !rc; i++) {
            if (i)
                rc = vram_write_buffer(&b, ",", 1);
            if (!rc)
                rc = vram_pool_snapshot(m->pools[i], vram_write_buffer, &b, 0);
        }
        if (!rc)
            rc = vram_write_buffer(&b, "]\n", 2);
    }
    size_t n_pools = m->n_pools;
    pthread_rwlock_unlock(&m->lock);
    if (!rc && want && !found) {
        free(b.data);
        char msg[600];
        snprintf(msg, sizeof msg, "no pool named \"%.400s\" is exposed (%zu pool%s are)", want,
                 n_pools, n_pools == 1 ? "" : "s");
        return vram__http_reply_json_error(c, MHD_HTTP_NOT_FOUND, msg);
    }
    if (rc) {
        free(b.data);
        return vram__http_reply_json_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, vram_last_error());
    }
    return reply(c, MHD_HTTP_OK, json_type, b.data, b.len, 1);
}

/* What *req holds for a request to one of the server's own paths, once its
 * header is seen; a routed request holds http_routes.c's state instead. */
static int seen;

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **req)
{
    vram_metrics *m = cls;
    /* A routed path, any method: http_routes.c reads the body and calls
     * the handler. */
    if (*req != &seen && (*req || vram__http_routed(m->hooks, url)))
        return vram__http_serve_route(m->hooks, m->max_body, c, url, method, upload, upload_size,
                                      req);
    /* Another method is answered at once, and the connection closed
     * without reading its body. */
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        char body[200];
        int n = snprintf(body, sizeof body, "method %.40s is not allowed: GET or HEAD\n", method);
        return vram__http_reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text_type, body, (size_t)n, 0,
                                "GET, HEAD");
    }
    /* GET and HEAD: the first call comes with the header only; answering
     * on a later one, once the request is complete, keeps the connection
     * alive for the next scrape. A body (none is expected) is discarded. */
    if (!*req) {
        *req = &seen;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    if (strcmp(url, "/metrics") == 0)
        return serve_metrics(m, c);
    if (strcmp(url, "/snapshot") == 0)
        return serve_snapshot(m, c);
    if (strcmp(url, "/healthz") == 0)
        return serve_health(m, c);
    if (strcmp(url, "/") == 0)
        return reply(c, MHD_HTTP_OK, text_type, (char *)index_page, sizeof index_page - 1, 0);
    return vram__http_reply_text(c, MHD_HTTP_NOT_FOUND, "no page %.200s: / lists them\n", url);
}

/* A request ends, answered or not: free what a routed one gathered. */
static void completed(void *cls, struct MHD_Connection *c, void **req,
                      enum MHD_RequestTerminationCode why)
{
    if (*req != &seen)
        vram__http_request_free(*req);
    *req = NULL;
}

static int check_limits(const vram_metrics_opts *o)
{
    if (o->port > 65535)
        return vram__fail(VRAM_EINVAL, "metrics server: port %u is above 65535", o->port);
    if (o->threads > 64)
        return vram__fail(VRAM_EINVAL, "metrics server: %u threads; at most 64", o->threads);
    if (o->max_connections > 4096)
        return vram__fail(VRAM_EINVAL, "metrics server: %u connections; at most 4096",
                          o->max_connections);
    if (o->max_header_bytes && (o->max_header_bytes < 4096 || o->max_header_bytes > (1u << 20)))
        return vram__fail(VRAM_EINVAL,
                          "metrics server: %zu bytes for a request; between 4096 and 1048576",
                          o->max_header_bytes);
    if (o->max_body_bytes && (o->max_body_bytes < 1024 || o->max_body_bytes > (16u << 20)))
        return vram__fail(VRAM_EINVAL,
                          "metrics server: %zu bytes for a request body; between 1024 and 16777216",
                          o->max_body_bytes);
    return vram__metrics_check_gpu(o->gpu, o->gpu_pci_bus_id);
}

static void destroy(vram_metrics *m)
{
    vram__http_hooks_destroy(m->hooks);
    pthread_rwlock_destroy(&m->lock);
    pthread_mutex_destroy(&m->log_lock);
    free(m->pools);
    free(m->gpu_pci);
    free(m);
}

int vram_metrics_start(const vram_metrics_opts *opts, vram_metrics **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_metrics_start: out is NULL");
    *out = NULL;
    vram_metrics_opts taken;
    int rc = vram_metrics_opts_init(&taken);
    if (!opts && rc)
        return rc;
    if (opts && (rc = vram__opts_take(&taken, opts, sizeof taken, "vram_metrics_opts")))
        return rc;
    opts = &taken;
    rc = check_limits(opts);
    if (!rc)
        rc = vram__metrics_check_pools(opts->pools, opts->n_pools);
    if (rc)
        return rc;

    const char *address = opts->address ? opts->address : vram_config_get()->metrics_address;
    struct sockaddr_in sa4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opts->port)};
    struct sockaddr_in6 sa6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)opts->port)};
    int ipv6 = 0;
    if (inet_pton(AF_INET, address, &sa4.sin_addr) != 1) {
        if (inet_pton(AF_INET6, address, &sa6.sin6_addr) != 1)
            return vram__fail(VRAM_EINVAL,
                              "metrics server: address \"%s\" is not an IPv4 or IPv6 literal "
                              "(e.g. 127.0.0.1, 0.0.0.0, ::1)",
                              address);
        ipv6 = 1;
    }

    vram_metrics *m = vram__calloc(1, sizeof *m);
    if (!m)
        return VRAM_EHOSTMEM;
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&m->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    pthread_mutex_init(&m->log_lock, NULL);
    m->monitor = opts->monitor;
    m->gpu = opts->gpu;
    m->max_body = opts->max_body_bytes ? opts->max_body_bytes : 64 * 1024;
    if (!(m->hooks = vram__http_hooks_create())) {
        destroy(m);
        return VRAM_EHOSTMEM;
    }
    if (opts->gpu_pci_bus_id && !(m->gpu_pci = vram__strdup(opts->gpu_pci_bus_id))) {
        destroy(m);
        return VRAM_EHOSTMEM;
    }
    if (opts->n_pools) {
        m->pools = vram__calloc(opts->n_pools, sizeof *m->pools);
        if (!m->pools) {
            destroy(m);
            return VRAM_EHOSTMEM;
        }
        memcpy(m->pools, opts->pools, opts->n_pools * sizeof *m->pools);
        m->n_pools = m->cap_pools = opts->n_pools;
    }

    unsigned threads = opts->threads ? opts->threads : 2;
    unsigned max_conn = opts->max_connections ? opts->max_connections : 64;
    unsigned timeout = opts->timeout_s ? opts->timeout_s : 10;
    size_t mem = opts->max_header_bytes ? opts->max_header_bytes : 32 * 1024;
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG | (ipv6 ? MHD_USE_IPv6 : 0);
    const struct sockaddr *sa = ipv6 ? (const struct sockaddr *)&sa6 : (const struct sockaddr *)&sa4;
    m->starting = 1;
    /* A pool of one thread is no pool: libmicrohttpd says so on stderr. */
    struct MHD_OptionItem extra[] = {
        {threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, threads, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    m->daemon = MHD_start_daemon(
        flags, (uint16_t)opts->port, NULL, NULL, handle, m, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, m,
        MHD_OPTION_NOTIFY_COMPLETED, completed, m, MHD_OPTION_SOCK_ADDR, sa,
        MHD_OPTION_CONNECTION_LIMIT, max_conn,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT, mem,
        MHD_OPTION_ARRAY, extra, MHD_OPTION_END);
    pthread_mutex_lock(&m->log_lock);
    m->starting = 0;
    pthread_mutex_unlock(&m->log_lock);
    if (!m->daemon) {
        rc = vram__fail(VRAM_EIO, "metrics server: cannot listen on %s port %u: %s", address,
                        opts->port,
                        m->start_log[0] ? m->start_log : "libmicrohttpd did not start (no reason given)");
        destroy(m);
        return rc;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
    m->port = info && info->port ? info->port : opts->port;
    vram_log(VRAM_LOG_INFO, "metrics server: http://%s%s%s:%u/metrics (%u threads, %u connections)",
              ipv6 ? "[" : "", address, ipv6 ? "]" : "", m->port, threads, max_conn);
    *out = m;
    return 0;
}

unsigned vram_metrics_port(const vram_metrics *m) { return m ? m->port : 0; }

vram__http_hooks *vram__metrics_hooks(vram_metrics *m) { return m->hooks; }

int vram_metrics_add_pool(vram_metrics *m, vram_pool *pool)
{
    if (!m || !pool)
        return vram__fail(VRAM_EINVAL, "vram_metrics_add_pool: server and pool are required");
    int rc = 0;
    pthread_rwlock_wrlock(&m->lock);
    for (size_t i = 0; i < m->n_pools && !rc; i++) {
        if (m->pools[i] == pool)
            rc = vram__fail(VRAM_EINVAL, "metrics server: pool \"%s\" is exposed already",
                            vram_pool_name(pool));
        else if (strcmp(vram_pool_name(m->pools[i]), vram_pool_name(pool)) == 0)
            rc = vram__fail(VRAM_EINVAL,
                            "metrics server: another exposed pool is named \"%s\"; the name labels "
                            "its series, so it must be unique",
                            vram_pool_name(pool));
    }
    if (!rc) {
        vram_pool **p = vram__grow(m->pools, &m->cap_pools, m->n_pools, sizeof *p, 4);
        if (!p)
            rc = VRAM_EHOSTMEM;
        else {
            m->pools = p;
            m->pools[m->n_pools++] = pool;
        }
    }
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

int vram_metrics_remove_pool(vram_metrics *m, vram_pool *pool)
{
    if (!m || !pool)
        return vram__fail(VRAM_EINVAL, "vram_metrics_remove_pool: server and pool are required");
    pthread_rwlock_wrlock(&m->lock);
    size_t i = 0;
    while (i < m->n_pools && m->pools[i] != pool)
        i++;
    int found = i < m->n_pools;
    if (found) {
        memmove(&m->pools[i], &m->pools[i + 1], (m->n_pools - i - 1) * sizeof *m->pools);
        m->n_pools--;
    }
    pthread_rwlock_unlock(&m->lock);
    return found ? 0
                 : vram__fail(VRAM_EINVAL, "metrics server: pool \"%s\" is not exposed",
                              vram_pool_name(pool));
}

int vram_metrics_write(vram_metrics *m, vram_write_fn write, void *ctx, unsigned flags)
{
    if (!m || !write || flags)
        return vram__fail(VRAM_EINVAL, "vram_metrics_write: server and write are required, and "
                                       "flags 0 (the exposition is text)");
    pthread_rwlock_rdlock(&m->lock);
    int rc = vram__metrics_print(m->pools, m->n_pools, m->monitor, m->gpu, m->gpu_pci, write,
                                 ctx);
    pthread_rwlock_unlock(&m->lock);
    return rc ? rc : vram__http_write_families(m->hooks, write, ctx);
}

int vram_metrics_stop(vram_metrics *m)
{
    if (!m)
        return 0;
    MHD_stop_daemon(m->daemon);
    destroy(m);
    return 0;
}
