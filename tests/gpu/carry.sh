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
# Idempotent: packages already downloaded are kept.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
packages=(libcjson1 libcjson-dev libcmocka0 libcmocka-dev libprotobuf-c1 libprotobuf-c-dev
          protobuf-c-compiler libprotoc32 libprotobuf32 libmicrohttpd12 libmicrohttpd-dev)
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
du -sh .carry/debs .carry/traces .carry/models
