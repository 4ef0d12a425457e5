#!/usr/bin/env bash
# scripts/web_deps.sh - the npm packages of the report page, pinned by
# package-lock.json and installed with `npm ci --ignore-scripts` into an
# ignored node_modules next to it; idempotent (a copy of the lock file in
# node_modules says what is installed) and safe to run from several builds
# at once (flock on the lock file).
#
#   scripts/web_deps.sh             web/: uPlot, which the build embeds in the page
#   scripts/web_deps.sh --browser   tests/report/: playwright-core, for the page's test
#   scripts/web_deps.sh --deploy    tests/deploy/: kubernetes-models and yaml, checking
#                                   the Kubernetes manifests against the API's schemas
#
# Needs nodejs and npm (`make deps`) and, the first time, the npm registry.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/web
case "${1:-}" in
  "") ;;
  --browser) dir=$root/tests/report ;;
  --deploy) dir=$root/tests/deploy ;;
  *) echo "usage: scripts/web_deps.sh [--browser|--deploy]" >&2; exit 2 ;;
esac

fail() { echo "web_deps: $*" >&2; exit 1; }
for c in node npm; do
  command -v "$c" >/dev/null || fail "$c is missing: run 'make deps' (nodejs, npm)"
done
[ -f "$dir/package-lock.json" ] || fail "$dir/package-lock.json is missing"

stamp=$dir/node_modules/.vramkit-lock.json
exec 9<"$dir/package-lock.json"
flock 9
if cmp -s "$dir/package-lock.json" "$stamp"; then
  exit 0
fi
echo "web_deps: npm ci --ignore-scripts in ${dir#"$root"/}"
# --ignore-scripts: none of these packages needs an install script (and
# playwright-core's would download browsers; the test uses Debian's chromium).
if ! (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
  fail "npm ci failed in $dir (is the npm registry reachable?)"
fi
cp "$dir/package-lock.json" "$stamp"
