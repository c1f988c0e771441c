#!/usr/bin/env bash
# Checks that two builds of dra-autoscaler plan the internet-scale workload
# (benches/internet.rs) identically: same pods placed, same nodes bought, every gang
# landing. A performance change must not change the plan (issue #28).
#
#   benches/compare_plan.sh BASELINE_BINARY NEW_BINARY [NODES ...]   (default: 10000)
#
# e.g. a release build of main against this branch's, at 10,000 and 100,000 nodes:
#   benches/compare_plan.sh /tmp/main/dra-autoscaler target/release/dra-autoscaler 10000 100000
# Each size's JSON plan of both binaries (`simulate -o json --now none`) must be
# byte-for-byte the same; the script also prints each run's wall time, user + system
# seconds and peak RSS (`/usr/bin/time -v`). Exit status 1 when a plan differs.
set -euo pipefail

if [[ $# -lt 2 ]]; then
    sed -n '2,12p' "$0"
    exit 2
fi
baseline=$1
new=$2
shift 2
sizes=("${@:-10000}")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --quiet --release --manifest-path "$here/Cargo.toml" --example gen_internet
target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$here/Cargo.toml" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')

run() { # binary input output
    /usr/bin/time -v "$1" simulate -o json --now none "$2" >"$3" 2>"$3.time"
    awk -F': ' '/Elapsed/ {w=$2} /User time/ {u=$2} /System time/ {s=$2}
        /Maximum resident/ {m=$2} END {printf "wall %s, user+sys %.2f s, peak RSS %d MiB\n", w, u+s, m/1024}' "$3.time"
}

status=0
for nodes in "${sizes[@]}"; do
    input="$work/internet-$nodes.json"
    "$target/release/examples/gen_internet" "$nodes" "$input"
    echo "baseline, $nodes nodes: $(run "$baseline" "$input" "$work/baseline.json")"
    echo "new,      $nodes nodes: $(run "$new" "$input" "$work/new.json")"
    if cmp -s "$work/baseline.json" "$work/new.json"; then
        lands=$(grep -c '"outcome": "lands"' "$work/new.json" || true)
        echo "$nodes nodes: the same plan ($lands pod groups land)"
    else
        echo "$nodes nodes: the plans differ:"
        diff "$work/baseline.json" "$work/new.json" | head -20
        status=1
    fi
    rm -f "$input"
done
exit $status
