/* src/video/source_synthetic.c - the source that needs nothing:
 * "synthetic:WxH[@FPS][,frames=N]" draws, for frame index i, a moving
 * gradient with a bright square crossing it, the same for the same i;
 * pts i / FPS. Without frames=N it never ends (until interrupted); with it,
 * it ends after N frames, or with loop starts again (counted as a loop).
 * Writes straight into the ring slot: nothing is allocated per frame. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source_internal.h"

#define SIZE_MIN 16
#define SIZE_MAX_PX 8192
#define FPS_MAX 1000.0

typedef struct synth {
    int width, height;
    double fps;
    int64_t frames;   /* per pass; 0: no end */
    int64_t index;    /* the next frame's, across passes */
    int64_t in_pass;  /* frames drawn in this pass */
} synth;

static int parse_int(const char **p, long min, long max, long *out)
{
    if (**p < '0' || **p > '9')
        return -1;
    errno = 0;
    char *end;
    long v = strtol(*p, &end, 10);
    if (errno || v < min || v > max)
        return -1;
    *p = end;
    *out = v;
    return 0;
}

/* WxH[@FPS][,frames=N] after the prefix. */
static int parse(const char *url, synth *y)
{
    const char *p = strchr(url, ':') + 1;
    long w, h, n = 0;
    if (parse_int(&p, SIZE_MIN, SIZE_MAX_PX, &w) || *p++ != 'x' ||
        parse_int(&p, SIZE_MIN, SIZE_MAX_PX, &h))
        return vram__fail(VRAM_EINVAL,
                          "video source \"%s\": not synthetic:WxH[@FPS][,frames=N] with W and H "
                          "in %d..%d",
                          url, SIZE_MIN, SIZE_MAX_PX);
    double fps = 30.0;
    if (*p == '@') {
        p++;
        if ((*p < '0' || *p > '9') && *p != '.')
            goto bad_fps;
        errno = 0;
        char *end;
        fps = strtod(p, &end);
        if (errno || end == p || !(fps > 0) || fps > FPS_MAX)
            goto bad_fps;
        p = end;
    }
    if (strncmp(p, ",frames=", 8) == 0) {
        p += 8;
        if (parse_int(&p, 1, 1000000000L, &n))
            return vram__fail(VRAM_EINVAL,
                              "video source \"%s\": frames= wants a count in 1..1000000000", url);
    }
    if (*p)
        return vram__fail(VRAM_EINVAL,
                          "video source \"%s\": unexpected \"%s\" after synthetic:WxH[@FPS]"
                          "[,frames=N]",
                          url, p);
    *y = (synth){.width = (int)w, .height = (int)h, .fps = fps, .frames = n};
    return 0;
bad_fps:
    return vram__fail(VRAM_EINVAL, "video source \"%s\": the frame rate after @ must be in (0, %g]",
                      url, FPS_MAX);
}

static int synth_open(vram_source *s)
{
    synth y;
    int rc = parse(s->url, &y);
    if (rc)
        return rc;
    synth *p = vram__calloc(1, sizeof *p);
    if (!p)
        return VRAM_EHOSTMEM;
    *p = y;
    s->impl = p;
    s->info.width = y.width;
    s->info.height = y.height;
    s->info.fps = y.fps;
    snprintf(s->info.codec, sizeof s->info.codec, "synthetic");
    s->info.seekable = y.frames > 0;
    return 0;
}

/* Frame i: red rises left to right and green top to bottom, both drifting
 * with i; blue cycles with i; a white square of a sixth of the shorter
 * side crosses from left to right, bobbing up and down. */
static void draw(const synth *y, int64_t i, vram_frame *f)
{
    int w = y->width, h = y->height;
    unsigned shift = (unsigned)(i * 3);
    uint8_t blue = (uint8_t)(i * 5);
    for (int r = 0; r < h; r++) {
        uint8_t *row = f->rgb + (size_t)r * f->stride;
        uint8_t g = (uint8_t)((unsigned)r * 255u / (unsigned)(h - 1) + shift);
        for (int x = 0; x < w; x++) {
            row[3 * x] = (uint8_t)((unsigned)x * 255u / (unsigned)(w - 1) + shift);
            row[3 * x + 1] = g;
            row[3 * x + 2] = blue;
        }
    }
    int side = (w < h ? w : h) / 6;
    if (side < 4)
        side = 4;
    int span_x = w - side + 1, span_y = h - side + 1;
    int step = w / 64 > 0 ? w / 64 : 1;
    int x0 = (int)((i * step) % span_x);
    int64_t bob = (i * step / 2) % (2 * (int64_t)span_y);
    int y0 = (int)(bob < span_y ? bob : 2 * (int64_t)span_y - 1 - bob);
    for (int r = y0; r < y0 + side; r++)
        memset(f->rgb + (size_t)r * f->stride + (size_t)x0 * 3, 255, (size_t)side * 3);
}

static int synth_next(vram_source *s, vram_frame *f)
{
    synth *y = s->impl;
    if (vram__source_interrupted(s))
        return 1;
    if (y->frames && y->in_pass == y->frames) {
        if (!s->opts.loop)
            return 1;
        y->in_pass = 0;
        atomic_fetch_add(&s->loops, 1);
    }
    f->width = y->width;
    f->height = y->height;
    f->stride = vram__rgb_stride(y->width);
    draw(y, y->index, f);
    f->pts_s = (double)y->index / y->fps;
    y->index++;
    y->in_pass++;
    return 0;
}

static void synth_close(vram_source *s)
{
    free(s->impl);
    s->impl = NULL;
}

const vram__source_ops vram__source_synthetic_ops = {
    .kind = "synthetic",
    .open = synth_open,
    .next = synth_next,
    .close = synth_close,
};
