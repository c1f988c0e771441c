#!/usr/bin/env bash
# Builds the real control plane from Go modules: etcd (./etcd) and
# kube-apiserver, kube-scheduler, kube-controller-manager and kubectl at
# Kubernetes v1.37.2 (./k8s), statically (CGO_ENABLED=0) and version-stamped, into a cache
# directory outside the clone keyed by the versions and the modules' go.sum, so
# a warm machine skips the build and a fresh one builds from cold.
#
# Prints the bin directory on stdout (everything else goes to stderr).
#
#   e2e/cluster/build.sh            # build if missing, print the bin dir
#   E2E_CLUSTER_CACHE=/some/dir …   # where the cache lives (default ~/.cache/dra-e2e)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

# Go on the machine is the Go we use: a go.mod asking for a newer one is an
# error to see, not a download to hide.
export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

kube_version="v1.37.2"
etcd_version="$(sed -n 's|^require go.etcd.io/etcd/server/v3 \(v[0-9.]*\)$|\1|p' "$here/etcd/go.mod")"
if [[ -z "$etcd_version" ]]; then
  echo "build.sh: cannot read the etcd version from $here/etcd/go.mod" >&2
  exit 1
fi

sum_key="$(cat "$here/k8s/go.sum" "$here/etcd/go.sum" | sha256sum | cut -c1-12)"
cache_root="${E2E_CLUSTER_CACHE:-${HOME}/.cache/dra-e2e}"
bin="$cache_root/k8s-$kube_version-etcd-$etcd_version-$sum_key/bin"
programs=(etcd kube-apiserver kube-scheduler kube-controller-manager kubectl)

have_all() {
  local p
  for p in "${programs[@]}"; do [[ -x "$bin/$p" ]] || return 1; done
}

if have_all; then
  echo "build.sh: warm: $bin" >&2
  echo "$bin"
  exit 0
fi

mkdir -p "$bin"
tmp="$(mktemp -d "$bin/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

minor="${kube_version#v1.}"; minor="${minor%%.*}"
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

start=$SECONDS
echo "build.sh: building Kubernetes $kube_version (kube-apiserver, kube-scheduler, kube-controller-manager, kubectl) into $bin" >&2
(cd "$here/k8s" && go build -trimpath -ldflags "-s -w$stamp" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kubectl)
echo "build.sh: building etcd $etcd_version" >&2
(cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)

# Only a complete set moves into place, so an interrupted build never leaves a
# half-filled directory that the next run would take as warm.
for p in "${programs[@]}"; do mv "$tmp/$p" "$bin/$p"; done
echo "build.sh: built in $((SECONDS - start)) s" >&2
echo "$bin"
