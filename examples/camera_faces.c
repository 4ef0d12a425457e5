/* examples/camera_faces.c - the video service from C: one service with a
 * memory budget, streams added by URL (each its own owner of the service's
 * pool), faces delivered to a callback as frames are processed, and every
 * stream's memory back to 0 when it ends.
 *
 *   camera_faces MODEL.onnx URL...      (URL: a file, rtsp://..., or
 *                                        synthetic:WxH@FPS)
 *
 * Each stream is limited to 60 frames, so files and synthetic cameras end
 * by themselves. */
#include <stdio.h>
#include <stdlib.h>

#include <vramkit.h>

static void on_result(void *ctx, const vram_result *r)
{
    unsigned long *faces = ctx;
    *faces += r->n_faces;
    if (r->n_faces && r->frame % 20 == 0)
        printf("%s frame %lld: %zu face(s), the first at [%.0f %.0f %.0f %.0f] score %.2f\n",
               r->stream, (long long)r->frame, r->n_faces, r->faces[0].box[0], r->faces[0].box[1],
               r->faces[0].box[2], r->faces[0].box[3], r->faces[0].score);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: camera_faces MODEL.onnx URL...\n");
        return 2;
    }
    unsigned long faces = 0;
    vram_service_opts o;
    vram_service_opts_init(&o);
    o.model = argv[1];
    o.executor = "cpu";
    o.workers = 2;
    o.batch = 4;
    o.budget = 256ull << 20;
    o.max_frames = 60;
    o.on_result = on_result;
    o.result_ctx = &faces;
    vram_service *svc;
    if (vram_service_create(&o, &svc)) {
        fprintf(stderr, "camera_faces: %s\n", vram_last_error());
        return 1;
    }
    int refused = 0;
    for (int i = 2; i < argc; i++) {
        vram_stream_opts so;
        vram_stream_opts_init(&so);
        so.url = argv[i];
        const char *id;
        if (vram_service_add_stream(svc, &so, &id)) {
            fprintf(stderr, "camera_faces: refused: %s\n", vram_last_error());
            refused++;
        } else {
            printf("stream %s: %s\n", id, argv[i]);
        }
    }
    vram_service_wait(svc, 300);
    vram_service_stop(svc);
    vram_service_print(svc, vram_write_stdio, stdout, 0);
    size_t n = 0;
    vram_stream_stats st[64];
    vram_service_streams(svc, st, 64, &n);
    unsigned long long live = 0;
    for (size_t i = 0; i < n && i < 64; i++)
        live += st[i].live_bytes;
    printf("camera_faces: %lu faces; the streams hold %llu bytes after the stop\n", faces, live);
    vram_service_destroy(svc);
    return refused || live ? 1 : 0;
}
