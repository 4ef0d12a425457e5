#!/usr/bin/env bash
# scripts/deps.sh - install the Debian packages vramkit needs, only those
# missing (idempotent). Runs as root (CI) or through sudo.
set -euo pipefail

packages=(
  build-essential   # gcc, make: the C11 library and CLI
  cmake             # the build underneath the Makefile
  pkg-config
  python3           # CLI tests read JSON output
  zlib1g-dev        # gzip traces
  libcjson-dev      # JSON: snapshots, statistics, replay output
  libcmocka-dev     # unit and integration tests
  clang             # libFuzzer targets
  libclang-rt-14-dev # sanitizer and libFuzzer runtimes for clang
  protobuf-c-compiler # protoc-c: C code for the ONNX subset the engine reads
  libprotobuf-c-dev # protobuf-c runtime: decoding ONNX models
  python3-onnx      # tests: generating ONNX models of every supported operator
  python3-numpy     # tests: .npy files for the models' inputs and outputs
  nodejs            # tests: ONNX Runtime (npm onnxruntime-node), the reference;
                    # the build: uPlot (npm) for the report page
  chromium          # tests: the report page opened headless (npm playwright-core)
  libmicrohttpd-dev # the metrics server: /metrics, /snapshot, /healthz over HTTP
  prometheus        # tests: promtool check metrics validates the exposition
)
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
  echo "deps: all ${#packages[@]} packages present"
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
