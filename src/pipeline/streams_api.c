/* src/pipeline/streams_api.c - the control API's routes over an ops table
 * (streams_api.h): GET /streams (every stream's statistics), GET
 * /streams/ID (one), POST /streams (admit the stream of the JSON body: 201,
 * 400 for malformed JSON or settings, 409 when admission refuses it, with
 * the sentence), DELETE /streams/ID (remove it: 200 with its last
 * statistics, 404 for an unknown id, 409 when it cannot go now). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_out.h"
#include "service_internal.h"
#include "streams_api.h"

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

static int list_streams(const vram__streams_api *api, vram_http_response *resp)
{
    size_t n = 0;
    vram_stream_stats *s = NULL;
    int rc = api->list(api->ctx, &s, &n);
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

static int one_stream(const vram__streams_api *api, const char *id, unsigned status,
                      vram_http_response *resp)
{
    vram_stream_stats s;
    if (api->stats(api->ctx, id, &s))
        return answer_error(resp, 404, vram_last_error());
    vram_buffer b = {0};
    vram__json j;
    vram__json_begin(&j, &b);
    vram__stream_stats_json(&j, NULL, &s);
    return answer_json(resp, status, &b, vram__json_done(&j));
}

static int add_stream(const vram__streams_api *api, const vram_http_request *req,
                      vram_http_response *resp)
{
    vram_stream_opts o;
    char strings[512];
    if (vram_stream_opts_parse(req->body, req->body_len, &o, strings, sizeof strings))
        return answer_error(resp, 400, vram_last_error());
    char id[64];
    int rc = api->add(api->ctx, &o, id, sizeof id);
    if (rc == VRAM_EHOSTMEM)
        return rc;
    if (rc)
        return answer_error(resp, 409, vram_last_error());
    return one_stream(api, id, 201, resp);
}

static int remove_stream(const vram__streams_api *api, const char *id,
                         vram_http_response *resp)
{
    vram_stream_stats s;
    if (api->stats(api->ctx, id, &s))
        return answer_error(resp, 404, vram_last_error());
    int rc = api->remove(api->ctx, id);
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
    const vram__streams_api *api = ctx;
    const char *rest = req->path + strlen("/streams");
    int get = !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD");
    if (!*rest) {
        if (get)
            return list_streams(api, resp);
        if (!strcmp(req->method, "POST"))
            return add_stream(api, req, resp);
        resp->allow = "GET, HEAD, POST";
        return answer_error(resp, 405, "/streams takes GET and POST");
    }
    const char *id = rest + 1; /* past the slash */
    if (!*id || strchr(id, '/'))
        return answer_error(resp, 404, "no such path: /streams/ID names one stream");
    if (get)
        return one_stream(api, id, 200, resp);
    if (!strcmp(req->method, "DELETE"))
        return remove_stream(api, id, resp);
    resp->allow = "GET, HEAD, DELETE";
    return answer_error(resp, 405, "/streams/ID takes GET and DELETE");
}

int vram__streams_api_route(vram_metrics *server, vram__streams_api *api, uint32_t *route_id)
{
    return vram_metrics_route(server, "/streams", handle, api, route_id);
}
