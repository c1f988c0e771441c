#!/usr/bin/env bash
# The differential test against kube-scheduler v1.37.2 (issue #26): builds the
# oracle (e2e/oracle/build.sh, cached outside the clone) and dra-differential,
# then compares our `simulate` with kube-scheduler on
#   - every fixed case: testdata/simulate/*/ and testdata/oracle/*.yaml,
#   - ORACLE_CLUSTERS generated clusters of seed ORACLE_SEED (5,000 of seed 1
#     by default: the same clusters on every run, so CI is deterministic).
# Exits non-zero on any disagreement; each one is written, with a shrunk
# copy, under ORACLE_OUT (default: e2e/oracle/disagreements/, git-ignored).
#
#   e2e/oracle/test.sh                                  # what CI runs
#   ORACLE_CLUSTERS=100000 ORACLE_SEED=7 e2e/oracle/test.sh   # a long run
#   e2e/oracle/test.sh --start 1514 --clusters 1        # extra flags go to dra-differential
#
# docs/testing.md ("The upstream oracle") says how to read a disagreement and
# how to run the oracle by hand on a snapshot.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/dra-autoscaler/target}"

oracle="$(e2e/oracle/build.sh)"
# Built as the workspace builds it (CI has just done so; a `-p` build would
# unify features differently and recompile part of the tree).
cargo build --locked --workspace --all-targets >&2
out="${ORACLE_OUT:-$root/e2e/oracle/disagreements}"
echo "test.sh: disagreements (if any) go to $out" >&2

exec "$CARGO_TARGET_DIR/debug/dra-differential" \
  --oracle "$oracle" \
  --out "$out" \
  --fixed testdata/simulate \
  --fixed testdata/oracle \
  --seed "${ORACLE_SEED:-1}" \
  --clusters "${ORACLE_CLUSTERS:-5000}" \
  "$@"
