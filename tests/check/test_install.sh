#!/usr/bin/env bash
# tests/check/test_install.sh SOURCE BUILD - vramkit installs and can be
# built on: `cmake --install` with a prefix under DESTDIR lays out the four
# libraries with their SONAMEs, the headers, the CLI, the man page, the
# pkg-config files and the CMake package; the examples build against that
# tree once with pkg-config (examples/Makefile) and once with
# find_package(vramkit) (examples/CMakeLists.txt), resolve the installed
# libraries and not the build tree's, and run: the budgeted pool refuses
# only the owner over its budget, the engine runs a model, and the monitor's
# metrics endpoint answers while the example works. The tree is used from
# where it was staged, as a relocated prefix.
set -euo pipefail
src=${1:?source dir}
build=${2:?build dir}
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. Install, staged.
DESTDIR=$tmp/stage cmake --install "$build" --prefix /opt/vramkit >"$tmp/install.log" \
  || { cat "$tmp/install.log"; fail "cmake --install failed"; }
p=$tmp/stage/opt/vramkit
for f in bin/vramkit include/vramkit.h include/vramkit/pool.h include/vramkit/version.h \
         share/man/man1/vramkit.1 lib/cmake/vramkit/vramkitConfig.cmake \
         lib/cmake/vramkit/vramkitConfigVersion.cmake; do
  [ -e "$p/$f" ] || fail "not installed: $f"
done
libdir=$(dirname "$(find "$p" -name 'libvramkit-core.so.0' | head -1)")
[ -d "$libdir" ] || fail "no libvramkit-core.so.0 under $p"
for lib in core observe engine service; do
  [ -L "$libdir/libvramkit-$lib.so" ] && [ -L "$libdir/libvramkit-$lib.so.0" ] \
    || fail "libvramkit-$lib.so and .so.0 are not links to the versioned file"
  soname=$(readelf -d "$libdir/libvramkit-$lib.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = "libvramkit-$lib.so.0" ] || fail "libvramkit-$lib: SONAME \"$soname\""
  [ -e "$libdir/pkgconfig/vramkit-$lib.pc" ] || fail "no vramkit-$lib.pc"
done
exports=$(nm -D --defined-only "$libdir/libvramkit-core.so" | awk '$2 ~ /[TDBRVW]/ {print $3}')
others=$(grep -v '^vram_' <<<"$exports" | grep -v '^_' || true)
[ -z "$others" ] || fail "libvramkit-core exports non-vram_ names: $others"
echo "installed: libvramkit-core exports $(grep -c '^vram_' <<<"$exports") vram_ functions and data"
head -1 "$p/share/man/man1/vramkit.1" | grep -q '^\.TH VRAMKIT 1' || fail "vramkit.1 is not a man page"
grep -q '^\.SS vramkit model sweep' "$p/share/man/man1/vramkit.1" || fail "the man page lacks model sweep"
"$p/bin/vramkit" --version | grep -q "^vramkit " || fail "the installed CLI does not run"

# 2. The examples, with pkg-config and with CMake.
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion vramkit-engine)" = "$("$p/bin/vramkit" --version | awk '{print $2}')" ] \
  || fail "pkg-config's version is not the CLI's"
mkdir -p "$tmp/pc"
make -s -C "$src/examples" OUT="$tmp/pc" >"$tmp/make.log" 2>&1 \
  || { cat "$tmp/make.log"; fail "the examples do not build with pkg-config"; }
unset PKG_CONFIG_PATH
cmake -S "$src/examples" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$p" >"$tmp/cmake.log" 2>&1 \
  && cmake --build "$tmp/cm" >>"$tmp/cmake.log" 2>&1 \
  || { cat "$tmp/cmake.log"; fail "the examples do not build with find_package(vramkit)"; }

model=${VRAM_ONNX_REF:-$src/build/onnxref}/models/mixed_small_cnn.onnx
[ -e "$model" ] || fail "no test model at $model (scripts/onnx_ref.sh --refs makes it)"
for way in pc cm; do
  d=$tmp/$way
  for ex in budgeted_pool engine_run monitor_metrics camera_faces; do
    where=$(ldd "$d/$ex" | awk '/libvramkit-core/ {print $3}')
    case "$where" in "$libdir"/*) ;; *) fail "$way/$ex loads libvramkit-core from \"$where\"" ;; esac
  done

  "$d/budgeted_pool" >"$tmp/bp.out" 2>&1 || { cat "$tmp/bp.out"; fail "$way: budgeted_pool failed"; }
  grep -q 'refused as it should be: budget of owner "cam01" exceeded: requested 40.0 MiB' \
    "$tmp/bp.out" || fail "$way: budgeted_pool: no budget refusal: $(cat "$tmp/bp.out")"
  grep -q '^cam02: 44 MiB live of a 64 MiB budget' "$tmp/bp.out" || fail "$way: cam02 was affected"
  grep -q '^budgeted_pool: done' "$tmp/bp.out" || fail "$way: budgeted_pool did not finish"

  "$d/engine_run" "$model" >"$tmp/er.out" 2>&1 || { cat "$tmp/er.out"; fail "$way: engine_run failed"; }
  grep -q '^output t10 .*\[1, 10\]' "$tmp/er.out" || fail "$way: engine_run: $(cat "$tmp/er.out")"
  # The model's 7168 B, and the cpu kernels' packed copy (its size depends on
  # the register tile this CPU takes).
  mem=$(sed -n 's/^memory weights \([0-9]*\) B once (\([0-9]*\) B of them packed.*/\1 \2/p' "$tmp/er.out")
  [ -n "$mem" ] && [ $(( ${mem% *} - ${mem#* } )) -eq 7168 ] && [ "${mem#* }" -gt 0 ] \
    || fail "$way: engine_run memory: $(cat "$tmp/er.out")"
  rc=0
  "$d/engine_run" "$tmp/none.onnx" >"$tmp/er_bad.out" 2>&1 || rc=$?
  [ $rc -eq 1 ] && grep -q "cannot open model" "$tmp/er_bad.out" \
    || fail "$way: engine_run on a missing model: exit $rc: $(cat "$tmp/er_bad.out")"

  VRAM_MONITOR_GPU=none VRAM_METRICS_GPU=none "$d/monitor_metrics" 4 >"$tmp/mm.out" 2>&1 &
  pid=$!
  url=
  for _ in $(seq 50); do
    url=$(sed -n 's|^serving \(http://[^ ]*\) .*|\1|p' "$tmp/mm.out")
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || fail "$way: monitor_metrics printed no URL: $(cat "$tmp/mm.out")"
  python3 - "$url" >"$tmp/metrics.txt" <<'EOF' || fail "$way: GET $url failed"
import sys, time, urllib.request
for _ in range(20):
    body = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
    if 'vram_pool_owner_live_bytes{pool="cameras",owner="cam04"}' in body:
        break
    time.sleep(0.1)
print(body)
EOF
  grep -q '^vram_pool_live_bytes{pool="cameras"} [1-9]' "$tmp/metrics.txt" \
    || fail "$way: /metrics has no live bytes for the pool: $(head -20 "$tmp/metrics.txt")"
  grep -q '^vram_monitor_' "$tmp/metrics.txt" || fail "$way: /metrics has no monitor families"
  wait "$pid" || { pid=; cat "$tmp/mm.out"; fail "$way: monitor_metrics failed"; }
  pid=
  grep -q '^monitor_metrics: done' "$tmp/mm.out" || fail "$way: monitor_metrics: $(cat "$tmp/mm.out")"
  grep -q 'live bytes level' "$tmp/mm.out" || fail "$way: the steady loop was not level: $(cat "$tmp/mm.out")"
  model_dir=${VRAM_TEST_MODELS:-$src/build/models}
  "$d/camera_faces" "$model_dir/blazeface_back.onnx" synthetic:320x240@30 synthetic:160x120@15 \
    >"$tmp/cf.out" 2>&1 || { cat "$tmp/cf.out"; fail "$way: camera_faces failed"; }
  grep -q '^camera_faces: 0 faces; the streams hold 0 bytes after the stop' "$tmp/cf.out" \
    || fail "$way: camera_faces: $(tail -5 "$tmp/cf.out")"
  grep -qE '^s0 +ended +60 +60 ' "$tmp/cf.out" || fail "$way: camera_faces: s0 did not process 60 frames: $(cat "$tmp/cf.out")"
  echo "$way: the four examples built and ran against the installed tree"
done
