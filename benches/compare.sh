#!/usr/bin/env bash
# Compares two builds of one benchmark binary on this machine by interleaving
# them (old, new, new, old, old, new, ...: each side goes first equally often),
# so both see the same machine state. Single samples on a shared VM vary by up
# to x2 from minute to minute, so figures from different days compare days,
# not code (docs/benchmarks.md).
#
#   benches/compare.sh OLD_BINARY NEW_BINARY FILTER [ROUNDS] [SAMPLES]
#
# The binaries are what `cargo bench -p dra-benches --bench plan --no-run`
# prints (target/release/deps/plan-<hash>), built from two checkouts; FILTER
# is divan's (a regex over benchmark paths). Prints each round's divan rows per
# side, then the median of the per-round medians for each benchmark.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 OLD_BINARY NEW_BINARY FILTER [ROUNDS] [SAMPLES]" >&2
  exit 2
fi
old=$(realpath -e -- "$1")
new=$(realpath -e -- "$2")
filter=$3 rounds=${4:-8} samples=${5:-20}
results=$(mktemp)
log=$(mktemp)
errors=$(mktemp)
trap 'rm -f "$results" "$log" "$errors"' EXIT

run_side() { # side round
  local binary=$old
  [ "$1" = new ] && binary=$new
  # --bench: without it divan runs each benchmark once, untimed, as a test.
  # stderr apart: the benchmarks print their plan's summary in mid-row.
  if ! "$binary" --bench "$filter" --sample-count "$samples" >"$log" 2>"$errors"; then
    cat "$log" "$errors" >&2
    echo "error: $binary failed (round $2)" >&2
    exit 1
  fi
  # divan's rows: <tree> name  fastest │ slowest │ median │ mean │ samples │ iters
  if ! grep -E '│ +[0-9]+ +│ +[0-9]+ *$' "$log" | sed "s/^/$1 r$2 /" | tee -a "$results"; then
    echo "error: no benchmark matches '$filter' in $binary" >&2
    exit 1
  fi
}

for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) = 1 ]; then
    run_side old "$round"; run_side new "$round"
  else
    run_side new "$round"; run_side old "$round"
  fi
done

python3 - "$results" <<'PY'
import re, statistics, sys
units = {"ps": 1e-9, "ns": 1e-6, "µs": 1e-3, "ms": 1.0, "s": 1000.0}
# "<side> r<round> <tree chars> <name>  <fastest> <unit> │ <slowest> │ <median> │ ..."
row = re.compile(r"^(old|new) r\d+ [│ ]*[├╰]─ (\S+)\s+(.*)$")
rounds = {}
for line in open(sys.argv[1], encoding="utf-8"):
    m = row.match(line.rstrip("\n"))
    if not m:
        continue
    side, name, rest = m.groups()
    cells = [c.strip() for c in rest.split("│")]
    value, unit = cells[2].split()
    rounds.setdefault((name, side), []).append(float(value) * units[unit])
for (name, side), values in sorted(rounds.items()):
    print(f"{side} {name}: median of {len(values)} round medians "
          f"{statistics.median(values):.2f} ms (round medians {min(values):.2f}-{max(values):.2f} ms)")
PY
