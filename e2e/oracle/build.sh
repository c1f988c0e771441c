#!/usr/bin/env bash
# Builds the upstream oracle (this folder's Go program, linked against
# k8s.io/kubernetes v1.37.2's scheduler) statically into a cache directory
# outside the clone, keyed by the Go module's files, so a warm machine skips
# the build and a fresh one builds from cold.
#
# Prints the binary's path on stdout (everything else goes to stderr).
#
#   e2e/oracle/build.sh                 # build if missing, print the path
#   ORACLE_CACHE=/some/dir …            # where the cache lives (default ~/.cache/dra-e2e)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

# Go on the machine is the Go we use: a go.mod asking for a newer one is an
# error to see, not a download to hide.
export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

# The key covers the dependencies (go.mod, go.sum) and the program itself.
key="$(cd "$here" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-12)"
cache_root="${ORACLE_CACHE:-${HOME}/.cache/dra-e2e}"
bin="$cache_root/oracle-k8s-v1.37.2-$key/oracle"

if [[ -x "$bin" ]]; then
  echo "build.sh: warm: $bin" >&2
  echo "$bin"
  exit 0
fi

mkdir -p "$(dirname "$bin")"
tmp="$(mktemp "$bin.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
start=$SECONDS
echo "build.sh: building the oracle (kube-scheduler v1.37.2's framework) into $bin" >&2
# -trimpath as e2e/cluster/build.sh builds, so both share the Go build cache.
(cd "$here" && go build -trimpath -ldflags "-s -w" -o "$tmp" .)
mv "$tmp" "$bin"
echo "build.sh: built in $((SECONDS - start)) s" >&2
echo "$bin"
