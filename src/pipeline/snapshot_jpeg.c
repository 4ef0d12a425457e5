/* src/pipeline/snapshot_jpeg.c - annotated JPEG snapshots
 * (snapshot_jpeg.h): faces drawn onto a frame, TurboJPEG encoding into a
 * buffer the caller keeps (TJFLAG_NOREALLOC) and the atomic file write. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "base/internal.h"
#include "snapshot_jpeg.h"

struct vram__jpeg_encoder {
    tjhandle tj;
};

int vram__jpeg_encoder_create(vram__jpeg_encoder **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram__jpeg_encoder_create: out is NULL");
    *out = NULL;
    vram__jpeg_encoder *e = vram__calloc(1, sizeof *e);
    if (!e)
        return VRAM_EHOSTMEM;
    e->tj = tjInitCompress();
    if (!e->tj) {
        free(e);
        return vram__fail(VRAM_EHOSTMEM, "cannot start the JPEG encoder: %s",
                          tjGetErrorStr2(NULL));
    }
    *out = e;
    return 0;
}

void vram__jpeg_encoder_destroy(vram__jpeg_encoder *e)
{
    if (!e)
        return;
    tjDestroy(e->tj);
    free(e);
}

size_t vram__jpeg_bound(int width, int height)
{
    if (width <= 0 || height <= 0)
        return 0;
    unsigned long b = tjBufSize(width, height, TJSAMP_420);
    return b == (unsigned long)-1 ? 0 : (size_t)b;
}

/* ---- drawing --------------------------------------------------------- */

typedef struct draw_target {
    uint8_t *rgb;
    int w, h;
    size_t stride;
} draw_target;

/* Fill [x0, x1) x [y0, y1), clipped. Coordinates are already bounded
 * (to_px), so the arithmetic cannot overflow. */
static void fill_rect(const draw_target *t, int x0, int y0, int x1, int y1, const uint8_t *c)
{
    x0 = x0 < 0 ? 0 : x0;
    y0 = y0 < 0 ? 0 : y0;
    x1 = x1 > t->w ? t->w : x1;
    y1 = y1 > t->h ? t->h : y1;
    for (int y = y0; y < y1; y++) {
        uint8_t *p = t->rgb + (size_t)y * t->stride + (size_t)x0 * 3u;
        for (int x = x0; x < x1; x++, p += 3) {
            p[0] = c[0];
            p[1] = c[1];
            p[2] = c[2];
        }
    }
}

/* A coordinate as a pixel index, bounded well outside the picture. */
static int to_px(float v, int limit)
{
    if (v < -16.0f)
        return -16;
    if (v > (float)limit + 16.0f)
        return limit + 16;
    return (int)floorf(v);
}

void vram__draw_faces(uint8_t *rgb, int width, int height, size_t stride, const vram_face *faces,
                      size_t n)
{
    static const uint8_t green[3] = {0, 255, 0}, red[3] = {255, 0, 0};
    if (!rgb || !faces || width <= 0 || height <= 0 || stride < (size_t)width * 3u)
        return;
    const draw_target t = {rgb, width, height, stride};
    for (size_t i = 0; i < n; i++) {
        const vram_face *f = &faces[i];
        int finite = 1;
        for (int k = 0; k < 4; k++)
            finite &= isfinite(f->box[k]) != 0;
        for (int k = 0; k < VRAM_BLAZEFACE_KEYPOINTS; k++)
            finite &= isfinite(f->keypoints[k][0]) && isfinite(f->keypoints[k][1]);
        if (!finite)
            continue;
        int x0 = to_px(fminf(f->box[0], f->box[2]), width);
        int x1 = to_px(fmaxf(f->box[0], f->box[2]), width);
        int y0 = to_px(fminf(f->box[1], f->box[3]), height);
        int y1 = to_px(fmaxf(f->box[1], f->box[3]), height);
        /* The outline's 2 pixels lie inside the box: rows y0, y0+1 and
         * y1-1, y1; columns likewise. */
        fill_rect(&t, x0, y0, x1 + 1, y0 + 2, green);
        fill_rect(&t, x0, y1 - 1, x1 + 1, y1 + 1, green);
        fill_rect(&t, x0, y0, x0 + 2, y1 + 1, green);
        fill_rect(&t, x1 - 1, y0, x1 + 1, y1 + 1, green);
        for (int k = 0; k < VRAM_BLAZEFACE_KEYPOINTS; k++) {
            int kx = to_px(f->keypoints[k][0], width), ky = to_px(f->keypoints[k][1], height);
            fill_rect(&t, kx - 2, ky - 2, kx + 3, ky + 3, red);
        }
    }
}

/* ---- encoding and writing -------------------------------------------- */

int vram__jpeg_encode(vram__jpeg_encoder *e, const uint8_t *rgb, int width, int height,
                      size_t stride, int quality, uint8_t *buf, size_t cap, size_t *len)
{
    if (len)
        *len = 0;
    if (!e || !rgb || !buf || !len)
        return vram__fail(VRAM_EINVAL, "vram__jpeg_encode: %s is NULL",
                          !e ? "encoder" : !rgb ? "rgb" : !buf ? "buf" : "len");
    size_t bound = vram__jpeg_bound(width, height);
    if (!bound || stride < (size_t)width * 3u || stride > INT_MAX)
        return vram__fail(VRAM_EINVAL, "vram__jpeg_encode: picture %dx%d with stride %zu", width,
                          height, stride);
    if (quality < 1 || quality > 100)
        return vram__fail(VRAM_EINVAL, "vram__jpeg_encode: quality %d (1..100)", quality);
    if (cap < bound)
        return vram__fail(VRAM_EINVAL,
                          "vram__jpeg_encode: buffer of %zu bytes, %zu needed for %dx%d", cap,
                          bound, width, height);
    unsigned char *dst = buf;
    unsigned long size = (unsigned long)cap;
    if (tjCompress2(e->tj, rgb, width, (int)stride, height, TJPF_RGB, &dst, &size, TJSAMP_420,
                    quality, TJFLAG_NOREALLOC) != 0)
        return vram__fail(VRAM_EIO, "cannot encode a %dx%d JPEG: %s", width, height,
                          tjGetErrorStr2(e->tj));
    *len = (size_t)size;
    return 0;
}

int vram__jpeg_write_file(const char *dir, const char *name, const uint8_t *buf, size_t len)
{
    if (!dir || !name || (!buf && len))
        return vram__fail(VRAM_EINVAL, "vram__jpeg_write_file: %s is NULL",
                          !dir ? "dir" : !name ? "name" : "buf");
    if (!*name || strchr(name, '/'))
        return vram__fail(VRAM_EINVAL, "vram__jpeg_write_file: name \"%s\" (a file name)", name);
    char path[PATH_MAX], tmp[PATH_MAX];
    int np = snprintf(path, sizeof path, "%s/%s", dir, name);
    int nt = snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
    if (np < 0 || nt < 0 || (size_t)nt >= sizeof tmp)
        return vram__fail(VRAM_EIO, "cannot write snapshot %s/%s: %s", dir, name,
                          strerror(ENAMETOOLONG));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return vram__fail(VRAM_EIO, "cannot write snapshot %s: %s", tmp, strerror(errno));
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, buf + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int err = w < 0 ? errno : EIO;
            close(fd);
            unlink(tmp);
            return vram__fail(VRAM_EIO, "cannot write snapshot %s: %s", tmp, strerror(err));
        }
        done += (size_t)w;
    }
    if (close(fd) != 0) {
        int err = errno;
        unlink(tmp);
        return vram__fail(VRAM_EIO, "cannot write snapshot %s: %s", tmp, strerror(err));
    }
    if (rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return vram__fail(VRAM_EIO, "cannot rename snapshot %s to %s: %s", tmp, path,
                          strerror(err));
    }
    return 0;
}
