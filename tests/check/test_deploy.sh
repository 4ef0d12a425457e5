#!/usr/bin/env bash
# tests/check/test_deploy.sh SOURCE BUILD - the container image definition
# and the Kubernetes manifests, checked without a cluster or a registry:
#   - deploy/k8s/*.yaml against the Kubernetes API schema of each kind
#     (kubernetes-models from npm, via scripts/web_deps.sh --deploy) and
#     against what the pods need (tests/deploy/validate.mjs: a GPU, probes
#     on /healthz, scrape annotations, the stream file from the ConfigMap);
#   - the stream file in the ConfigMap is JSON with a url for every stream;
#   - deploy/Dockerfile's run stage asks only for packages Debian 12 has
#     (where apt's lists are present), and starts a model make models makes.
set -euo pipefail
src=$1 build=$2
fail() { echo "test_deploy: $*" >&2; exit 1; }

bash "$src/scripts/web_deps.sh" --deploy
out=$build/deploy-check
rm -rf "$out"
node "$src/tests/deploy/validate.mjs" --out "$out" "$src"/deploy/k8s/*.yaml
# The checker finds what it is there to find: a manifest without a GPU and
# with a string for replicas.
sed -e 's/replicas: 1/replicas: "one"/' -e 's|nvidia.com/gpu: 1|cpu: "1"|' \
  "$src/deploy/k8s/deployment.yaml" > "$out/bad.yaml"
if node "$src/tests/deploy/validate.mjs" "$out/bad.yaml" "$src/deploy/k8s/configmap.yaml" \
     2> "$out/bad.err"; then
  fail "a Deployment with replicas \"one\" and no GPU passed the check"
fi
grep -q 'replicas must be integer' "$out/bad.err" || fail "no schema error for replicas: $(cat "$out/bad.err")"
grep -q 'asks for no nvidia.com/gpu' "$out/bad.err" || fail "no error for the missing GPU"

# The image starts the model that make models writes.
model=$(grep -o 'share/vramkit/[a-z_]*\.onnx' "$src/deploy/Dockerfile" | sort -u)
[ -n "$model" ] || fail "deploy/Dockerfile starts no model"
for m in $model; do
  grep -q "DIR/$(basename "$m")" "$src/scripts/models.sh" ||
    fail "deploy/Dockerfile names $m, which scripts/models.sh does not make"
done
for f in "$src"/deploy/k8s/*.yaml; do
  for m in $(grep -o 'share/vramkit/[a-z_]*\.onnx' "$f" | sort -u); do
    grep -q "$m" "$src/deploy/Dockerfile" || fail "$(basename "$f") starts $m, which the image lacks"
  done
done
# The run stage's packages exist in this Debian release.
if [ -n "$(apt-cache policy libc6 2>/dev/null | grep Candidate | grep -v none)" ]; then
  pkgs=$(sed -n '/^FROM debian:12-slim/,$p' "$src/deploy/Dockerfile" |
         sed -n '/apt-get install/,/rm -rf/p' | tr ' \\' '\n\n' |
         grep -E '^lib|^zlib|^ca-' || true)
  [ -n "$pkgs" ] || fail "no packages found in the Dockerfile's run stage"
  for p in $pkgs; do
    apt-cache show "$p" >/dev/null 2>&1 || fail "deploy/Dockerfile installs $p, which apt does not know"
  done
fi
echo "test_deploy: manifests, stream file and image definition check out"
