#!/usr/bin/env bash
# tests/check/test_layers.sh SOURCE BUILD - the layering check
# (scripts/check_layers.sh) passes on the tree and the libraries as built,
# and fails, naming the reference, when an upward one is planted: a core
# file that includes an observe header, a tool that includes a library's
# internal header, and a core library that calls a function of the
# observe library.
set -euo pipefail
src=${1:?source dir}
build=${2:?build dir}
check=$src/scripts/check_layers.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

rc=0
out=$(bash "$check" --src "$src" --lib "$build" 2>&1) || rc=$?
echo "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: the layering check exited $rc on the tree" >&2; exit 1; }
case "$out" in "layering: ok;"*) ;; *) echo "FAIL: the tree does not pass" >&2; exit 1 ;; esac
grep -q "libvramkit-core [0-9]" <<<"$out" || { echo "FAIL: no export count" >&2; exit 1; }

expect_fail() { # expect_fail NEEDLE ARGS...
  local needle=$1 rc=0 got
  shift
  got=$(bash "$check" "$@" 2>&1) || rc=$?
  if [ "$rc" -ne 1 ] || ! grep -qF -- "$needle" <<<"$got"; then
    echo "FAIL: expected exit 1 with \"$needle\", got $rc:" >&2
    echo "$got" >&2
    exit 1
  fi
  echo "refused as it should be: $(grep -F -- "$needle" <<<"$got" | head -1)"
}

# An include upwards: core includes the OOM report's header.
mkdir -p "$tmp/tree/src/core/mem" "$tmp/tree/src/observe" "$tmp/tree/tools/vramkit"
printf '#include "vramkit/pool.h"\n#include "vramkit/oom.h"\n' >"$tmp/tree/src/core/mem/planted.c"
expect_fail "planted.c (core) includes vramkit/oom.h of libvramkit-observe, a layer above it" \
  --src "$tmp/tree"
# Core including another library's internals.
printf '#include "observe/prom.h"\n' >"$tmp/tree/src/core/mem/planted.c"
expect_fail "includes observe/prom.h, internal to libvramkit-observe above it" --src "$tmp/tree"
rm "$tmp/tree/src/core/mem/planted.c"
# A tool reaching into a library.
printf '#include "mem/pool_internal.h"\n' >"$tmp/tree/tools/vramkit/planted.c"
expect_fail "planted.c (tools) includes mem/pool_internal.h" --src "$tmp/tree"
rm "$tmp/tree/tools/vramkit/planted.c"
# The observe layer may include core's helper kit, and pass.
printf '#include "base/internal.h"\n#include "vramkit/pool.h"\n#include "vramkit/monitor.h"\n' \
  >"$tmp/tree/src/observe/fine.c"
bash "$check" --src "$tmp/tree" --quiet

# A symbol upwards: a core library calling vram_monitor_start (observe's),
# beside the real observe and engine libraries.
mkdir "$tmp/lib"
cp -P "$build"/libvramkit-observe.so* "$build"/libvramkit-engine.so* "$tmp/lib/"
cat >"$tmp/core.c" <<'C'
int vram_monitor_start(const void *opts, void **out);
int vram_pool_create(const void *opts, void **out);
int vram_pool_create(const void *opts, void **out) { return vram_monitor_start(opts, out); }
int vram__internal_helper(void);
int vram__internal_helper(void) { return 0; }
C
cc -shared -fPIC -o "$tmp/lib/libvramkit-core.so" "$tmp/core.c"
expect_fail "libvramkit-core references vram_monitor_start of libvramkit-observe, a layer above it" \
  --lib "$tmp/lib"
expect_fail "libvramkit-core exports vram__internal_helper, which is not a public vram_ name" \
  --lib "$tmp/lib"
echo "layering check: ok"
