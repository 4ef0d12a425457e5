/* tests/faces/faces_driver.c - vramkit's own way from frames to faces, for
 * comparing with tests/faces/reference.mjs: the raw RGB24 frames of a clip
 * through vram_letterbox_frame (BlazeFace's normalization: scale 2, bias
 * -1, black bars), the engine (public API, one execution context) and
 * vram_blazeface_decode, one JSON Lines line per frame in the service's
 * schema (boxes and keypoints in source pixels).
 *
 *   faces_driver --model M.onnx --raw FRAMES.rgb --width W --height H
 *                [--fps 25] [--stream ID] [--out OUT.jsonl] [--threshold T]
 *                [--executor cpu|cuda]
 *
 * Prints the mean time per frame of each stage on stderr. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vramkit/blazeface.h"
#include "vramkit/engine.h"
#include "vramkit/error.h"
#include "vramkit/video.h"

typedef struct args {
    const char *model, *raw, *stream, *out, *executor;
    int width, height;
    double fps;
    float threshold;
} args;

static int usage(void)
{
    fprintf(stderr, "usage: faces_driver --model M.onnx --raw FRAMES.rgb --width W --height H "
                    "[--fps 25] [--stream ID] [--out OUT.jsonl] [--threshold T] "
                    "[--executor cpu|cuda]\n");
    return 2;
}

static int parse(int argc, char **argv, args *a)
{
    *a = (args){.stream = "c", .executor = "cpu", .fps = 25};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--model"))
            a->model = v;
        else if (!strcmp(k, "--raw"))
            a->raw = v;
        else if (!strcmp(k, "--width"))
            a->width = atoi(v);
        else if (!strcmp(k, "--height"))
            a->height = atoi(v);
        else if (!strcmp(k, "--fps"))
            a->fps = atof(v);
        else if (!strcmp(k, "--stream"))
            a->stream = v;
        else if (!strcmp(k, "--out"))
            a->out = v;
        else if (!strcmp(k, "--threshold"))
            a->threshold = (float)atof(v);
        else if (!strcmp(k, "--executor"))
            a->executor = v;
        else
            return -1;
    }
    return argc % 2 == 1 && a->model && a->raw && a->width > 0 && a->height > 0 && a->fps > 0
               ? 0
               : -1;
}

static int failed(const char *what, int rc)
{
    fprintf(stderr, "faces_driver: %s: %s: %s\n", what, vram_err_name(rc), vram_last_error());
    return 1;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The model's tensors: input size, and outputs 0..3 as scores16, scores32,
 * regs16, regs32 told apart by their shapes. */
static int find_tensors(vram_exec *exec, int *size, size_t which[4])
{
    vram_tensor_desc d;
    int rc = vram_exec_input_desc(exec, 0, &d);
    if (rc)
        return rc;
    if (d.rank != 4 || d.dims[1] != d.dims[2] || d.dims[3] != 3)
        return vram_set_error(VRAM_EINVAL, "input %s is not [1, S, S, 3]", d.name);
    *size = (int)d.dims[1];
    int seen = 0;
    for (size_t i = 0; !vram_exec_output_desc(exec, i, &d); i++) {
        int k = d.rank != 3                               ? -1
                : d.dims[1] == 512 && d.dims[2] == 1      ? 0
                : d.dims[1] == 384 && d.dims[2] == 1      ? 1
                : d.dims[1] == 512 && d.dims[2] == 16     ? 2
                : d.dims[1] == 384 && d.dims[2] == 16     ? 3
                                                          : -1;
        if (k >= 0) {
            which[k] = i;
            seen |= 1 << k;
        }
    }
    return seen == 15 ? 0
                      : vram_set_error(VRAM_EINVAL, "the model lacks BlazeFace's four outputs");
}

static void write_line(FILE *f, const char *stream, long frame, double pts, int w, int h,
                       const vram_face *faces, size_t n)
{
    fprintf(f, "{\"stream\":\"%s\",\"frame\":%ld,\"pts\":%.6f,\"width\":%d,\"height\":%d,"
               "\"detections\":[",
            stream, frame, pts, w, h);
    for (size_t i = 0; i < n; i++) {
        const vram_face *c = &faces[i];
        fprintf(f, "%s{\"box\":[%.2f,%.2f,%.2f,%.2f],\"score\":%.5f,\"keypoints\":[",
                i ? "," : "", c->box[0], c->box[1], c->box[2], c->box[3], c->score);
        for (int k = 0; k < VRAM_BLAZEFACE_KEYPOINTS; k++)
            fprintf(f, "%s[%.2f,%.2f]", k ? "," : "", c->keypoints[k][0], c->keypoints[k][1]);
        fprintf(f, "]}");
    }
    fprintf(f, "]}\n");
}

int main(int argc, char **argv)
{
    args a;
    if (parse(argc, argv, &a))
        return usage();

    vram_engine_opts eo;
    vram_engine_opts_init(&eo);
    eo.executor = a.executor;
    vram_engine *engine = NULL;
    vram_exec *exec = NULL;
    vram_blazeface *bf = NULL;
    int rc = vram_engine_load(a.model, &eo, &engine);
    if (rc)
        return failed("vram_engine_load", rc);
    int size = 0;
    size_t which[4] = {0};
    if ((rc = vram_exec_create(engine, &exec)) || (rc = find_tensors(exec, &size, which))) {
        failed("execution context", rc);
        goto out;
    }
    vram_blazeface_opts bo;
    vram_blazeface_opts_init(&bo);
    bo.input_size = size;
    bo.score_threshold = a.threshold;
    if ((rc = vram_blazeface_create(&bo, &bf))) {
        failed("vram_blazeface_create", rc);
        goto out;
    }

    const vram_letterbox lb = {.width = size, .height = size, .layout = VRAM_LAYOUT_NHWC,
                               .scale = {2, 2, 2}, .bias = {-1, -1, -1}, .pad = -1};
    const size_t frame_bytes = (size_t)a.width * (size_t)a.height * 3u;
    const size_t in_floats = (size_t)size * (size_t)size * 3u;
    const size_t out_floats[4] = {512, 384, 512 * 16, 384 * 16};
    uint8_t *rgb = malloc(frame_bytes);
    float *input = malloc(in_floats * sizeof(float));
    float *outs[4] = {0};
    for (int k = 0; k < 4; k++)
        outs[k] = malloc(out_floats[k] * sizeof(float));
    void *scratch = malloc(vram_blazeface_scratch_bytes(bf));
    FILE *raw = fopen(a.raw, "rb");
    FILE *jsonl = a.out ? fopen(a.out, "w") : stdout;
    vram_face faces[64];
    double t_lb = 0, t_run = 0, t_dec = 0;
    long frame = 0;
    if (!rgb || !input || !outs[0] || !outs[1] || !outs[2] || !outs[3] || !scratch) {
        rc = failed("buffers", VRAM_EHOSTMEM);
    } else if (!raw || !jsonl) {
        fprintf(stderr, "faces_driver: cannot open %s\n", !raw ? a.raw : a.out);
        rc = 1;
    }
    while (!rc) {
        size_t got = fread(rgb, 1, frame_bytes, raw);
        if (got == 0)
            break;
        if (got != frame_bytes) {
            fprintf(stderr, "faces_driver: %s: frame %ld is cut short\n", a.raw, frame);
            rc = 1;
            break;
        }
        vram_letterbox_map map;
        double t0 = now_s();
        if ((rc = vram_letterbox_frame(&lb, rgb, a.width, a.height, (size_t)a.width * 3u, input,
                                       &map))) {
            rc = failed("vram_letterbox_frame", rc);
            break;
        }
        double t1 = now_s();
        if ((rc = vram_exec_set_input(exec, 0, input, in_floats * sizeof(float))) ||
            (rc = vram_exec_run(exec))) {
            rc = failed("run", rc);
            break;
        }
        for (int k = 0; k < 4 && !rc; k++)
            rc = vram_exec_read_output(exec, which[k], outs[k], out_floats[k] * sizeof(float));
        if (rc) {
            rc = failed("outputs", rc);
            break;
        }
        double t2 = now_s();
        const float to_source[3] = {map.scale, map.offset_x, map.offset_y};
        size_t n = 0;
        if ((rc = vram_blazeface_decode(bf, outs[0], outs[2], outs[1], outs[3], to_source,
                                        scratch, faces, 64, &n))) {
            rc = failed("vram_blazeface_decode", rc);
            break;
        }
        double t3 = now_s();
        t_lb += t1 - t0;
        t_run += t2 - t1;
        t_dec += t3 - t2;
        write_line(jsonl, a.stream, frame, (double)frame / a.fps, a.width, a.height, faces,
                   n < 64 ? n : 64);
        frame++;
    }
    if (!rc && frame)
        fprintf(stderr,
                "faces_driver: %ld frames of %s: letterbox %.3f ms, model %.2f ms, decode "
                "%.3f ms a frame\n",
                frame, a.raw, t_lb * 1e3 / (double)frame, t_run * 1e3 / (double)frame,
                t_dec * 1e3 / (double)frame);
    if (raw)
        fclose(raw);
    if (jsonl && jsonl != stdout && fclose(jsonl) != 0 && !rc) {
        fprintf(stderr, "faces_driver: cannot write %s\n", a.out);
        rc = 1;
    }
    free(scratch);
    for (int k = 0; k < 4; k++)
        free(outs[k]);
    free(input);
    free(rgb);
out:
    vram_blazeface_destroy(bf);
    vram_exec_destroy(exec);
    vram_engine_destroy(engine);
    return rc ? 1 : 0;
}
