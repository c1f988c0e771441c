#!/usr/bin/env bash
# Compares two builds of one benchmark binary on this machine by interleaving
# them: old, new, old, new, ... so both see the same machine state. Single
# samples on a shared VM vary by up to x2 from minute to minute, so figures
# from different days compare days, not code (docs/benchmarks.md).
#
#   benches/compare.sh OLD_BINARY NEW_BINARY FILTER [ROUNDS] [SAMPLES]
#
# The binaries are what `cargo bench -p dra-benches --bench plan --no-run`
# prints (target/release/deps/plan-<hash>), built from two checkouts. Prints
# each round's divan line per side, then the median of the per-round medians.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 OLD_BINARY NEW_BINARY FILTER [ROUNDS] [SAMPLES]" >&2
  exit 2
fi
old=$1 new=$2 filter=$3 rounds=${4:-8} samples=${5:-20}
cd "$(dirname "$0")"
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for round in $(seq 1 "$rounds"); do
  for side in old new; do
    binary=$old
    [ "$side" = new ] && binary=$new
    # --bench: without it divan runs each benchmark once, untimed, as a test.
    # divan's table: name │ fastest │ slowest │ median │ mean │ samples │ iters
    "$binary" --bench "$filter" --sample-count "$samples" 2>/dev/null |
      grep -E '│ +[0-9]+ +│ +[0-9]+$' | sed "s/^/$side r$round /" | tee -a "$results"
  done
done
# Median of the per-round medians (the table's median column), per side and row.
python3 - "$results" <<'PY'
import re, statistics, sys
units = {"ns": 1e-6, "µs": 1e-3, "ms": 1.0, "s": 1000.0}
rounds = {}
for line in open(sys.argv[1], encoding="utf-8"):
    side, _, rest = line.split(" ", 2)
    cells = [c.strip() for c in rest.split("│")]
    # First cell: "r<round> ╰─ <name>  <fastest> <unit>"; the third is the median.
    name = cells[0].split()[-3]
    value, unit = cells[2].split()
    rounds.setdefault((name, side), []).append(float(value) * units[unit])
for (name, side), values in sorted(rounds.items()):
    print(f"{side} {name}: median of {len(values)} round medians {statistics.median(values):.2f} ms, "
          f"range {min(values):.2f}-{max(values):.2f} ms")
PY
