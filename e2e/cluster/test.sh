#!/usr/bin/env bash
# The end-to-end suite on the real control plane: builds etcd and Kubernetes
# v1.37.2 (cached, see build.sh) and our binaries, then runs every scenario of
# e2e/local/tests/real_cluster.rs (each starts its own cluster with up.sh and
# tears it down) plus the stack tests that run on either backend, one at a time.
# Ends with the line "N passed, M failed" and exits non-zero when any failed.
#
#   e2e/cluster/test.sh [nextest filter args...]   # over the workspace, e.g. -E 'test(kubectl)'
set -euo pipefail
cd "$(dirname "$0")/../.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/dra-autoscaler/target}"
bin="$(e2e/cluster/build.sh)"
echo "test.sh: Kubernetes binaries in $bin" >&2

# simulate (scenario 1 compares the real scheduler with it) and the stack's tests.
# The workspace's targets, as `cargo nextest run --workspace` builds them (CI has just
# done so): a `-p` build would unify features differently and recompile ~40 crates.
cargo build --locked --workspace --all-targets >&2
export DRA_AUTOSCALER_BIN="$CARGO_TARGET_DIR/debug/dra-autoscaler"
export DRA_E2E_BACKEND=real
export DRA_E2E_DIR="${DRA_E2E_DIR:-$(mktemp -d /tmp/dra-e2e-suite.XXXXXX)}"

filter=("$@")
if [[ ${#filter[@]} -eq 0 ]]; then
  # The real-cluster scenarios and the gate check (ignored in a plain `cargo nextest run`), the stack tests
  # written for both backends (DRA_E2E_BACKEND=real picks the real one).
  filter=(--run-ignored all -E 'package(dra-local-stack) & (binary(real_cluster) | binary(real_versions) | binary(gang_lands))')
fi

log="$DRA_E2E_DIR/nextest.log"
set +e
cargo nextest run --locked --workspace --no-fail-fast --test-threads 1 \
  --failure-output final --success-output never "${filter[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

# nextest's summary line: "Summary [ 123.4s] 8 tests run: 7 passed, 1 failed, 0 skipped".
passed="$(sed -n 's/.* \([0-9]\+\) passed.*/\1/p' "$log" | tail -n1)"
failed="$(sed -n 's/.* \([0-9]\+\) failed.*/\1/p' "$log" | tail -n1)"
passed="${passed:-0}"
failed="${failed:-0}"
if [[ $status -ne 0 && $failed -eq 0 ]]; then
  failed=1 # nextest itself failed (a build error, say): never report green.
fi
echo "cluster logs of failed tests: $DRA_E2E_DIR" >&2
echo "$passed passed, $failed failed"
[[ $failed -eq 0 && $status -eq 0 ]]
