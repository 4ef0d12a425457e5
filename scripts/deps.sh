#!/usr/bin/env bash
# scripts/deps.sh [run|test] - install the Debian packages vramkit needs,
# only those missing (idempotent). "run" (the default): what building it and
# `make run` need; "test": those and what the tests add (make deps-test).
# Runs as root (CI) or through sudo.
set -euo pipefail
set_name=${1:-run}

packages=(
  build-essential   # gcc, make: the C11 libraries and the CLI
  cmake             # the build underneath the Makefile
  pkg-config        # finding the libraries below; the installed .pc files
  zlib1g-dev        # core: gzip traces
  libcjson-dev      # observe and the CLI: reading and writing JSON
  protobuf-c-compiler # engine: protoc-c makes C code for the ONNX subset it reads
  libprotobuf-c-dev # engine: the protobuf-c runtime, decoding ONNX models
  libmicrohttpd-dev # observe: the metrics server (/metrics, /snapshot, /healthz)
  nodejs            # the build: uPlot (npm) for the report page; the BlazeFace model (npm)
  libavformat-dev   # service: files and network streams (mp4, mkv, ts, rtsp, http, udp)
  libavcodec-dev    # service: decoding them on the CPU
  libswscale-dev    # service: decoded pictures to RGB
  libavutil-dev
  libturbojpeg0-dev # service: annotated JPEG snapshots
  libffmpeg-nvenc-dev # service: the NVDEC headers (ffnvcodec; libnvcuvid is loaded at run time)
  ffmpeg            # make run: the sample clips, made once
  python3-skimage   # make run: astronaut.png, a real photograph with a face, for a clip
  python3-onnx      # make run: the BlazeFace model given a symbolic batch (tools/onnx/rebatch.py)
)
test_packages=(
  python3           # tests read JSON output and make ONNX models
  libcmocka-dev     # unit and integration tests
  clang             # libFuzzer targets
  libclang-rt-14-dev # sanitizer and libFuzzer runtimes for clang
  python3-numpy     # .npy files for the models' inputs and outputs
  rtsp-server-perl  # a real RTSP server on loopback for camera streams
  curl              # a real HTTP client against the control API
  chromium          # the report page opened headless (npm playwright-core)
  prometheus        # promtool check metrics validates the exposition
)
case "$set_name" in
  run) ;;
  test) packages+=("${test_packages[@]}") ;;
  *) echo "deps: unknown set \"$set_name\" (run or test)" >&2; exit 2 ;;
esac
# npm comes with some nodejs builds (NodeSource's) and conflicts with
# Debian's npm package there: ask for it only where the command is missing.
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps ($set_name): all ${#packages[@]} packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
