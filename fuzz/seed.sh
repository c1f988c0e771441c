#!/usr/bin/env bash
# Seeds the fuzz corpora from testdata/ (the corpora themselves are not
# committed; libFuzzer grows them in fuzz/corpus/<target>/).
#   usage: fuzz/seed.sh [DIR]   (DIR/<target>/; default fuzz/corpus, which long
#                                runs grow: CI seeds a fresh DIR instead)
#   loader:   every YAML/JSON file under testdata/
#   cel:      every CEL expression in testdata/ and the ported cel-spec cases
#   allocate: a few fixed byte strings and 2,000 fixed pseudo-random ones
#             (the target builds clusters from bytes)
#   and, for CEL and the loader, 2,000 and 1,000 seeds with a few fixed
#   pseudo-random edits each
set -euo pipefail
out="$(realpath -m "${1:-$(dirname "$0")/corpus}")"
cd "$(dirname "$0")"
export CORPUS="$out"
mkdir -p "$out/loader" "$out/cel" "$out/allocate"
find ../testdata -name '*.yaml' -o -name '*.json' | while read -r f; do
  size=$(wc -c <"$f")
  # libFuzzer's default -max_len is small; big snapshots only slow it down.
  if [ "$size" -le 65536 ]; then
    cp "$f" "$out/loader/$(echo "$f" | sed 's|^\.\./testdata/||; s|/|_|g')"
  fi
done
python3 - <<'PY'
import hashlib, json, os, pathlib, random, re
root = pathlib.Path(os.environ["CORPUS"])
out = root / "cel"
exprs = set()
for path in pathlib.Path("../testdata").rglob("*.yaml"):
    for m in re.finditer(r"expression:\s*(?:'((?:[^']|'')*)'|\"((?:[^\"\\]|\\.)*)\"|(\S.*))", path.read_text(errors="replace")):
        e = m.group(1) or m.group(2) or m.group(3) or ""
        if len(e) < 4096:
            exprs.add(e.replace("''", "'"))
for line in pathlib.Path("../testdata/cel-spec/cases.jsonl").read_text().splitlines():
    if line.strip():
        exprs.add(json.loads(line)["expr"])
for e in exprs:
    (out / hashlib.sha1(e.encode()).hexdigest()).write_text(e)
for i, seed in enumerate([b"", b"\x01" * 64, bytes(range(256)), b"\xff" * 128, b"\x07\x03" * 50]):
    (root / "allocate" / f"seed-{i}").write_bytes(seed)
# Fixed pseudo-random inputs (CI replays them: the same every run). The
# allocate target builds a cluster from any bytes, so random bytes are random
# clusters; CEL expressions and snapshots get seeds with a few edits each.
rng = random.Random(1)
for i in range(2000):
    data = bytes(rng.randrange(256) for _ in range(rng.randrange(16, 257)))
    (root / "allocate" / f"random-{i:04}").write_bytes(data)
TOKENS = ["(", ")", "[", "]", "{", "}", "!", "-", "+", "*", "/", "%", "&&", "||", "?", ":",
          ".", ",", '"', "'", 'r"', 'b"', "\\", "0x", "9223372036854775807", "-9223372036854775808",
          "1e308", "18446744073709551615u", "size(", ".map(x, ", ".all(x, ", ".exists(x, ",
          'device.attributes["gpu.example.com"]', 'device.capacity["gpu.example.com"]',
          'quantity("1Gi")', 'semver("1.2.3")', "==", "<", ">=", "in", "null", "true", " "]
def mutate(text, pieces, edits):
    for _ in range(edits):
        op = rng.randrange(4)
        at = rng.randrange(len(text) + 1)
        if op == 0:
            text = text[:at] + rng.choice(pieces) + text[at:]
        elif op == 1 and text:
            text = text[:at] + text[at + rng.randrange(1, 8):]
        elif op == 2 and text:
            start = rng.randrange(len(text))
            text = text[:at] + text[start:start + rng.randrange(1, 32)] + text[at:]
        else:
            text = text[:at]  if rng.randrange(4) == 0 else text[:at] + text[at:][::-1][:4] + text[at:]
    return text
cel_seeds = sorted(exprs)
for i in range(2000):
    e = mutate(rng.choice(cel_seeds), TOKENS, rng.randrange(1, 5))
    (out / f"edited-{i:04}").write_text(e)
yaml_seeds = sorted(p.name for p in (root / "loader").iterdir())
YAML_PIECES = ["\n", ": ", "- ", "---\n", "{", "}", "[", "]", "&a ", "*a", "!!binary ", "'", '"', "#",
               "-1", "0", "1e9", "999999999999999999999", "Gi", "m", "~", "null", "|\n  ", ">\n  "]
for i in range(1000):
    base = (root / "loader" / rng.choice(yaml_seeds)).read_text(errors="replace")
    (root / "loader" / f"edited-{i:04}").write_text(mutate(base, YAML_PIECES, rng.randrange(1, 5)))
PY
echo "corpora in $out: $(ls "$out/loader" | wc -l) loader, $(ls "$out/cel" | wc -l) cel, $(ls "$out/allocate" | wc -l) allocate"
