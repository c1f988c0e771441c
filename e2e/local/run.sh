#!/usr/bin/env bash
# The local stack in one command: builds the four binaries and starts them
# (API stand-in, scheduler stand-in, fake provider, dra-autoscaler run), applies
# the NodeGroup CRD, the example NodeGroups and a DeviceClass, and prints how to
# point kubectl at it. Ctrl-C stops everything. Flags go to `dra-local-stack up`
# (--dir, --api-port, --provider, --scan-interval, --log-format json, ...).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build -p dra-fake-apiserver -p dra-fake-scheduler -p dra-provider-fake \
  -p dra-autoscaler -p dra-local-stack
target_dir="${CARGO_TARGET_DIR:-target}"
exec "$target_dir/debug/dra-local-stack" up "$@"
