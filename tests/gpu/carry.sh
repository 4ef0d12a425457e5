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
#                  the face clips, a 1080p H.264 clip at 30 fps, and the
#                  independent reference's faces for the face clips (ONNX
#                  Runtime and the JavaScript decoder, tests/faces/check_decode.sh)
# Idempotent: packages already downloaded are kept.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
packages=(libcjson1 libcjson-dev libcmocka0 libcmocka-dev libprotobuf-c1 libprotobuf-c-dev
          protobuf-c-compiler libprotoc32 libprotobuf32 libmicrohttpd12 libmicrohttpd-dev
          libturbojpeg0 libturbojpeg0-dev)
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
if [ ! -s "$svc/clips/reference.jsonl" ]; then
  cmake -S . -B build >/dev/null && cmake --build build --target faces_driver >/dev/null
  ref=$(mktemp -d)
  VRAM_FACE_CLIPS=$svc/clips VRAM_FACE_OUT=$ref bash tests/faces/check_decode.sh \
    "$(find build -name faces_driver -type f | head -1)" >/dev/null
  grep -hE '"stream": ?"(astronaut|faces2|noface)"' "$ref/js.jsonl" >"$svc/clips/reference.jsonl"
  rm -rf "$ref"
fi
du -sh .carry/debs .carry/traces .carry/models .carry/ffmpeg "$svc"
