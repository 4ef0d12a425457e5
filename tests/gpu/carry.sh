#!/usr/bin/env bash
# tests/gpu/carry.sh - fill .carry/ (ignored by git) with what a GPU machine
# without a package manager or the internet needs for tests/gpu/run, so that
# it can travel with the working tree:
#   .carry/debs    the Debian packages of the libraries the build links and
#                  the machine may lack (cJSON, cmocka, protobuf-c and
#                  protoc-c with the protobuf libraries it links,
#                  libmicrohttpd), unpacked there by tests/gpu/run
#   .carry/traces  the shared allocation traces (../shared/data/traces or
#                  $VRAM_SHARED_TRACES)
#   .carry/models  the BlazeFace models (build/onnxref/blazeface, which
#                  scripts/onnx_ref.sh --refs makes)
#   .carry/ffmpeg  static FFmpeg libraries for the video service
#                  (tests/gpu/ffmpeg_build.sh, from Debian's source package)
#   .carry/service the service's stage: its default models (scripts/models.sh),
#                  the face clips, 1080p H.264 and HEVC clips at 30 fps, the
#                  NVDEC test clips, and the
#                  independent reference's faces for the face clips (ONNX
#                  Runtime and the JavaScript decoder, tests/faces/check_decode.sh)
# Idempotent: packages already downloaded are kept.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
packages=(libcjson1 libcjson-dev libcmocka0 libcmocka-dev libprotobuf-c1 libprotobuf-c-dev
          protobuf-c-compiler libprotoc32 libprotobuf32 libmicrohttpd12 libmicrohttpd-dev
          libturbojpeg0 libturbojpeg0-dev libffmpeg-nvenc-dev)
mkdir -p .carry/debs .carry/traces .carry/models
missing=()
for p in "${packages[@]}"; do
  compgen -G ".carry/debs/${p}_*.deb" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  (cd .carry/debs && apt-get download "${missing[@]}")
fi
traces=${VRAM_SHARED_TRACES:-$root/../shared/data/traces}
if [ -d "$traces" ]; then
  cp -u "$traces"/*.csv.gz .carry/traces/
else
  echo "carry: no shared traces at $traces; the GPU run replays the project's own only" >&2
fi
if [ ! -d build/onnxref/blazeface ]; then
  bash scripts/onnx_ref.sh --refs build/onnxref >/dev/null
fi
cp -u build/onnxref/blazeface/*.onnx .carry/models/
bash tests/gpu/ffmpeg_build.sh .carry/ffmpeg
svc=.carry/service
mkdir -p "$svc/models" "$svc/clips"
bash scripts/models.sh build/models >/dev/null
cp -u build/models/blazeface_back.onnx build/models/blazeface_front.onnx "$svc/models/"
bash tests/faces/make_clips.sh "$svc/clips" >/dev/null
if [ ! -s "$svc/clips/cam1080.mp4" ]; then
  # 10 s of the astronaut photograph panned at 1920x1080, 30 fps, H.264 as
  # a camera sends it (no B-frames, a key frame a second).
  ffmpeg -nostdin -hide_banner -loglevel error -y -loop 1 -framerate 30 -t 10 \
    -i /usr/lib/python3/dist-packages/skimage/data/astronaut.png -filter_complex \
    "[0:v]scale=1920:1920,crop=1920:1080:0:'200+100*sin(t)',format=yuv420p[v]" -map '[v]' \
    -c:v libx264 -preset veryfast -crf 23 -g 30 -bf 0 -r 30 -f mp4 "$svc/clips/cam1080.mp4.part"
  mv "$svc/clips/cam1080.mp4.part" "$svc/clips/cam1080.mp4"
fi
# NVDEC: 1080p30 camera-like clips at 4 Mbit/s (the astronaut panned, with
# sensor noise, a key frame a second, no B-frames) in H.264 and HEVC for the
# density runs; short clips with B-frames in both for exact decoding; and
# streams NVDEC refuses (MJPEG in a container the GPU machine's FFmpeg
# reads, 10-bit HEVC, H.264 wider than its 4096).
camclip() { # OUT CODEC
  [ -s "$1" ] && return 0
  ffmpeg -nostdin -hide_banner -loglevel error -y -loop 1 -framerate 30 -t 10 \
    -i /usr/lib/python3/dist-packages/skimage/data/astronaut.png -filter_complex \
    "[0:v]scale=1920:1920,crop=1920:1080:0:'200+100*sin(t)',noise=alls=6:allf=t,format=yuv420p[v]" \
    -map '[v]' -c:v "$2" -preset veryfast -b:v 4M -maxrate 4M -bufsize 8M -g 30 -bf 0 -r 30 \
    -f mp4 "$1.part"
  mv "$1.part" "$1"
}
camclip "$svc/clips/cam1080_h264.mp4" libx264
camclip "$svc/clips/cam1080_hevc.mp4" libx265
small() { # OUT ARGS...: 64 frames of a moving test pattern
  local out=$1
  shift
  [ -s "$out" ] && return 0
  ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=640x360:rate=30 \
    -frames:v 64 "$@" "$out.part.${out##*.}"
  mv "$out.part.${out##*.}" "$out"
}
small "$svc/clips/bframes_h264.mp4" -pix_fmt yuv420p -c:v libx264 -bf 3 -g 16
small "$svc/clips/bframes_hevc.mp4" -pix_fmt yuv420p -c:v libx265 -x265-params bframes=3:keyint=16:log-level=error
small "$svc/clips/mjpeg.mov" -pix_fmt yuvj420p -c:v mjpeg
small "$svc/clips/hevc10.mkv" -pix_fmt yuv420p10le -c:v libx265 -x265-params log-level=error
if [ ! -s "$svc/clips/wide_h264.mp4" ]; then
  ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=4160x240:rate=30 \
    -frames:v 8 -pix_fmt yuv420p -c:v libx264 "$svc/clips/wide_h264.part.mp4"
  mv "$svc/clips/wide_h264.part.mp4" "$svc/clips/wide_h264.mp4"
fi
# The NV12 letterbox tests' clips, as tests/common/nv12_clips.h makes them
# where ffmpeg is (the GPU machine reads them from .carry/nv12).
mkdir -p .carry/nv12
nv12() { # NAME SIZE OPTIONS...
  local name=$1 size=$2
  shift 2
  [ -s ".carry/nv12/$name" ] && return 0
  ffmpeg -nostdin -y -loglevel error -f lavfi -i "testsrc2=size=$size:rate=30,noise=alls=40:allf=t+u" \
    -frames:v 3 -c:v libx264 -preset veryfast "$@" ".carry/nv12/$name"
}
nv12 bt601.mp4 1920x1080 -pix_fmt yuv420p
nv12 bt709.mp4 1280x720 -pix_fmt yuv420p -colorspace bt709 -color_primaries bt709 -color_trc bt709 -color_range tv
nv12 full.mp4 854x480 -pix_fmt yuvj420p
nv12 full2020.mp4 640x360 -pix_fmt yuv420p -color_range pc -colorspace bt2020nc
if [ ! -s "$svc/clips/reference.jsonl" ]; then
  cmake -S . -B build >/dev/null && cmake --build build --target faces_driver >/dev/null
  ref=$(mktemp -d)
  VRAM_FACE_CLIPS=$svc/clips VRAM_FACE_OUT=$ref bash tests/faces/check_decode.sh \
    "$(find build -name faces_driver -type f | head -1)" >/dev/null
  grep -hE '"stream": ?"(astronaut|faces2|noface)"' "$ref/js.jsonl" >"$svc/clips/reference.jsonl"
  rm -rf "$ref"
fi
du -sh .carry/debs .carry/traces .carry/models .carry/ffmpeg "$svc"
