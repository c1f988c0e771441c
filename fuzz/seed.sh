#!/usr/bin/env bash
# Seeds the fuzz corpora from testdata/ (the corpora themselves are not
# committed; libFuzzer grows them in fuzz/corpus/<target>/).
#   loader:   every YAML/JSON file under testdata/
#   cel:      every CEL expression in testdata/ and the ported cel-spec cases
#   allocate: a few fixed byte strings (the target builds clusters from bytes)
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p corpus/loader corpus/cel corpus/allocate
find ../testdata -name '*.yaml' -o -name '*.json' | while read -r f; do
  size=$(wc -c <"$f")
  # libFuzzer's default -max_len is small; big snapshots only slow it down.
  if [ "$size" -le 65536 ]; then
    cp "$f" "corpus/loader/$(echo "$f" | sed 's|^\.\./testdata/||; s|/|_|g')"
  fi
done
python3 - <<'PY'
import hashlib, json, pathlib, re
out = pathlib.Path("corpus/cel")
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
    pathlib.Path(f"corpus/allocate/seed-{i}").write_bytes(seed)
PY
echo "corpora: $(ls corpus/loader | wc -l) loader, $(ls corpus/cel | wc -l) cel, $(ls corpus/allocate | wc -l) allocate"
