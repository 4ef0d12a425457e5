#!/usr/bin/env bash
# tests/faces/make_clips.sh - the short H.264 clips the face tests read,
# made with Debian's ffmpeg from scikit-image's astronaut photograph (a
# real face; python3-skimage). Idempotent: a clip already there is kept.
#
#   tests/faces/make_clips.sh OUTDIR
#
# OUTDIR/astronaut.mp4  640x480, 25 fps, 3 s: a window over the photograph
#                       panning and zooming slowly (one face, every frame
#                       different)
# OUTDIR/faces2.mp4     640x360, 25 fps, 3 s: the astronaut's head twice
#                       (once mirrored, smaller) moving over a plain
#                       background
# OUTDIR/noface.mp4     640x360, 25 fps, 3 s: ffmpeg's testsrc2 pattern
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: tests/faces/make_clips.sh OUTDIR" >&2; exit 2; }
out=$1
photo=${VRAM_ASTRONAUT:-/usr/lib/python3/dist-packages/skimage/data/astronaut.png}
command -v ffmpeg >/dev/null || { echo "make_clips: ffmpeg is missing: run 'make deps'" >&2; exit 1; }
[ -f "$photo" ] || { echo "make_clips: $photo is missing: run 'make deps' (python3-skimage)" >&2; exit 1; }
mkdir -p "$out"

x264=(-c:v libx264 -pix_fmt yuv420p -preset veryfast -crf 20 -g 25 -bf 0 -an)

# make NAME FFMPEG-ARGS...: into NAME.part.mp4, renamed when complete.
make() {
  local name=$1
  shift
  [ -s "$out/$name" ] && return 0
  ffmpeg -nostdin -hide_banner -loglevel error -y "$@" "${x264[@]}" -f mp4 "$out/$name.part"
  mv "$out/$name.part" "$out/$name"
  echo "make_clips: $out/$name"
}

# The top 512x384 of the photograph (the face at x 170..280, y 60..190),
# zoomed from 1 to 1.3 while the window moves right and down, at 640x480.
make astronaut.mp4 -loop 1 -framerate 25 -t 3 -i "$photo" -filter_complex \
  "[0:v]crop=512:384:0:0,zoompan=z='1+0.004*in':x='1.3*in':y='0.5*in':d=1:s=640x480:fps=25,format=yuv420p[v]" \
  -map '[v]' -frames:v 75

# The head (x 140..310, y 10..200 of the photograph) twice over a plain
# background: 120 px wide drifting right, mirrored at 96 px drifting left.
make faces2.mp4 -f lavfi -i "color=c=0x4a5a6a:s=640x360:r=25:d=3" -i "$photo" -filter_complex \
  "[1:v]crop=170:190:140:10,split[a][b];[a]scale=120:134[h1];[b]hflip,scale=96:108[h2];\
[0:v][h1]overlay=x='60+40*t':y='110+15*sin(2*t)'[t1];\
[t1][h2]overlay=x='470-35*t':y='60+10*t',format=yuv420p[v]" \
  -map '[v]' -frames:v 75

make noface.mp4 -f lavfi -i "testsrc2=s=640x360:r=25:d=3" -frames:v 75
