/* src/pipeline/api.c - the control API on the metrics server: GET /streams
 * (every stream's statistics), GET /streams/ID (one), POST /streams (admit
 * the stream of the JSON body: 201, 400 for malformed JSON or settings, 409
 * when admission refuses it, with the sentence), DELETE /streams/ID (remove
 * it: 200 with its last statistics, 404 for an unknown id); and the
 * service's pools and families in /metrics. Serving is attached by
 * vram_service_serve and detached by vram_service_stop. */
#include <stdlib.h>
#include <string.h>

#include "base/json_out.h"
#include "service_internal.h"


/* A JSON body {"error": sentence} with `status`. */
static int answer_error(vram_http_response *resp, unsigned status, const char *sentence)
{
    vram_buffer b = {0};
    vram__json j;
    vram__json_begin(&j, &b);
    vram__json_object(&j, NULL);
    vram__json_str(&j, "error", sentence);
    vram__json_end(&j);
    int rc = vram__json_done(&j);
    if (rc) {
        vram_buffer_free(&b);
        return rc;
    }
    resp->status = status;
    resp->body = b.data;
    resp->body_len = b.len;
    return 0;
}

static int answer_json(vram_http_response *resp, unsigned status, vram_buffer *b, int rc)
{
    if (rc) {
        vram_buffer_free(b);
        return rc;
    }
    resp->status = status;
    resp->body = b->data;
    resp->body_len = b->len;
    return 0;
}

static int list_streams(vram_service *svc, vram_http_response *resp)
{
    size_t n = 0;
    vram_stream_stats *s = NULL;
    int rc = vram__streams_copy(svc, &s, &n);
    if (rc)
        return rc;
    vram_buffer b = {0};
    vram__json j;
    vram__json_begin(&j, &b);
    vram__json_object(&j, NULL);
    vram__json_array(&j, "streams");
    for (size_t i = 0; i < n; i++)
        vram__stream_stats_json(&j, NULL, &s[i]);
    vram__json_end(&j);
    vram__json_end(&j);
    free(s);
    return answer_json(resp, 200, &b, vram__json_done(&j));
}

static int one_stream(vram_service *svc, const char *id, unsigned status,
                      vram_http_response *resp)
{
    vram_stream_stats s;
    if (vram_service_stream_stats(svc, id, &s))
        return answer_error(resp, 404, vram_last_error());
    vram_buffer b = {0};
    vram__json j;
    vram__json_begin(&j, &b);
    vram__stream_stats_json(&j, NULL, &s);
    return answer_json(resp, status, &b, vram__json_done(&j));
}

static int add_stream(vram_service *svc, const vram_http_request *req, vram_http_response *resp)
{
    vram_stream_opts o;
    char strings[512];
    if (vram_stream_opts_parse(req->body, req->body_len, &o, strings, sizeof strings))
        return answer_error(resp, 400, vram_last_error());
    const char *id = NULL;
    int rc = vram_service_add_stream(svc, &o, &id);
    if (rc == VRAM_EHOSTMEM)
        return rc;
    if (rc)
        return answer_error(resp, 409, vram_last_error());
    char copy[64];
    snprintf(copy, sizeof copy, "%s", id);
    return one_stream(svc, copy, 201, resp);
}

static int remove_stream(vram_service *svc, const char *id, vram_http_response *resp)
{
    vram_stream_stats s;
    if (vram_service_stream_stats(svc, id, &s))
        return answer_error(resp, 404, vram_last_error());
    int rc = vram_service_remove_stream(svc, id);
    if (rc == VRAM_EINVAL)
        return answer_error(resp, 404, vram_last_error());
    if (rc == VRAM_EBUSY)
        return answer_error(resp, 409, vram_last_error());
    if (rc)
        return rc;
    vram_buffer b = {0};
    vram__json j;
    vram__json_begin(&j, &b);
    vram__json_object(&j, NULL);
    vram__json_str(&j, "removed", id);
    vram__stream_stats_json(&j, "last", &s);
    vram__json_end(&j);
    return answer_json(resp, 200, &b, vram__json_done(&j));
}

static int handle(void *ctx, const vram_http_request *req, vram_http_response *resp)
{
    vram_service *svc = ctx;
    const char *rest = req->path + strlen("/streams");
    int get = !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD");
    if (!*rest) {
        if (get)
            return list_streams(svc, resp);
        if (!strcmp(req->method, "POST"))
            return add_stream(svc, req, resp);
        resp->allow = "GET, HEAD, POST";
        return answer_error(resp, 405, "/streams takes GET and POST");
    }
    const char *id = rest + 1; /* past the slash */
    if (!*id || strchr(id, '/'))
        return answer_error(resp, 404, "no such path: /streams/ID names one stream");
    if (get)
        return one_stream(svc, id, 200, resp);
    if (!strcmp(req->method, "DELETE"))
        return remove_stream(svc, id, resp);
    resp->allow = "GET, HEAD, DELETE";
    return answer_error(resp, 405, "/streams/ID takes GET and DELETE");
}

int vram_service_serve(vram_service *svc, vram_metrics *server)
{
    if (!svc || !server)
        return vram__fail(VRAM_EINVAL, "vram_service_serve: NULL argument");
    if (svc->server)
        return vram__fail(VRAM_EINVAL, "vram_service_serve: the service is served already");
    int rc = vram_metrics_route(server, "/streams", handle, svc, &svc->route_id);
    if (rc)
        return rc;
    svc->server = server;
    svc->pools_served = 0;
    if (!(rc = vram_metrics_add_pool(server, svc->host_pool)))
        svc->pools_served |= 1;
    if (!rc && svc->dev_pool && !(rc = vram_metrics_add_pool(server, svc->dev_pool)))
        svc->pools_served |= 2;
    if (!rc && !(rc = vram__families_add(svc)))
        svc->families_added = 1;
    if (rc) {
        vram__saved_error e;
        vram__error_save(&e);
        vram__service_unserve(svc);
        return vram__error_restore(&e, rc);
    }
    return 0;
}

void vram__service_unserve(vram_service *svc)
{
    if (!svc->server)
        return;
    vram_metrics_unroute(svc->server, svc->route_id);
    if (svc->families_added)
        vram_metrics_remove_families(svc->server, svc->families_id);
    if (svc->pools_served & 1)
        vram_metrics_remove_pool(svc->server, svc->host_pool);
    if (svc->pools_served & 2)
        vram_metrics_remove_pool(svc->server, svc->dev_pool);
    svc->families_added = 0;
    svc->pools_served = 0;
    svc->server = NULL;
}
