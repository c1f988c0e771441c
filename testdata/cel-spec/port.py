#!/usr/bin/env python3
"""Ports cel-spec's `simple` conformance tests to testdata/cel-spec/cases.jsonl.

Usage: port.py CEL_SPEC_CHECKOUT > testdata/cel-spec/cases.jsonl

Only the cases the DRA selector environment can express are kept: no
bindings or type environments (a selector sees only `device`), no protobuf
messages, containers, timestamps, durations or extension libraries outside
the Kubernetes base environment, no `disable_check` cases (Kubernetes always
type-checks) and no type-valued results. Each line is one case:
{"file", "section", "name", "expr", "value"|"error"} where a value is typed
JSON: {"int": "1"}, {"uint": "1"}, {"double": "1.5"|"nan"|"inf"|"-inf"},
{"string": ...}, {"bytes": [..]}, {"bool": ...}, {"null": null},
{"list": [...]}, {"map": [[k, v], ...]}.
"""
import json
import re
import subprocess
import sys

FILES = ["basic", "comparisons", "conversions", "fp_math", "integer_math", "lists",
         "logic", "macros", "macros2", "optionals", "string", "parse", "plumbing"]
# Expressions using what a DRA selector cannot (messages, time, type values).
EXCLUDED = re.compile(r"TestAllTypes|google\.|timestamp|duration|\btype\(|\bdyn\(|"
                      r"\bint\)|\buint\)|\bdouble\)|\bstring\)|\bbytes\)|\bbool\)|"
                      r"null_type|list_type|map_type|getSeconds|proto|enum|"
                      r"\bmath\.|\bsets\.|\bbase64\.|\bstrings\.")

TOKEN = re.compile(r'\s*(?:(#[^\n]*)|("(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\')|([{}:\[\],<>])|([^\s{}:\[\],<>"\']+))')


def unescape(lit):
    body, out, i = lit[1:-1], bytearray(), 0
    simple = {"n": 10, "t": 9, "r": 13, "a": 7, "b": 8, "f": 12, "v": 11,
              "\\": 92, "'": 39, '"': 34, "?": 63}
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        n = body[i + 1]
        if n in simple:
            out.append(simple[n]); i += 2
        elif n in "xX":
            m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:]).group()
            out.append(int(m, 16)); i += 2 + len(m)
        elif n in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:]).group()
            out.append(int(m, 8)); i += 1 + len(m)
        elif n == "u":
            out += chr(int(body[i + 2:i + 6], 16)).encode(); i += 6
        elif n == "U":
            out += chr(int(body[i + 2:i + 10], 16)).encode(); i += 10
        else:
            raise ValueError(f"escape {n!r}")
    return bytes(out)


def tokens(text):
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                return
            raise ValueError(f"at {text[pos:pos+40]!r}")
        pos = m.end()
        if m.group(1):
            continue
        if m.group(2):
            yield ("str", unescape(m.group(2)))
        elif m.group(3):
            yield ("punct", m.group(3))
        elif m.group(4):
            yield ("atom", m.group(4))


def parse_message(toks, closing):
    """A message as a list of (field, value) pairs; nested messages are lists."""
    fields = []
    while True:
        kind, tok = next(toks, (None, None))
        if kind is None or tok == closing:
            return fields
        name = tok
        kind, tok = next(toks)
        if tok == ":":
            kind, tok = next(toks)
        if tok in ("{", "<"):
            fields.append((name, parse_message(toks, "}" if tok == "{" else ">")))
        elif kind == "str":
            value = tok
            fields.append((name, value))
        else:
            fields.append((name, tok))


def get(msg, key):
    return [v for k, v in msg if k == key]


def one(msg, key):
    vals = get(msg, key)
    return vals[0] if vals else None


def typed(value):
    """A cel-spec Value message as typed JSON, or None if not expressible."""
    (key, v), = value
    if key == "int64_value":
        return {"int": str(int(v))}
    if key == "uint64_value":
        return {"uint": str(int(v))}
    if key == "double_value":
        s = v.lower()
        return {"double": {"nan": "nan", "inf": "inf", "-inf": "-inf", "infinity": "inf",
                           "-infinity": "-inf"}.get(s, v)}
    if key == "string_value":
        return {"string": v.decode("utf-8")}
    if key == "bytes_value":
        return {"bytes": list(v)}
    if key == "bool_value":
        return {"bool": v == "true"}
    if key == "null_value":
        return {"null": None}
    if key == "list_value":
        items = [typed(x) for x in get(v, "values")]
        return None if None in items else {"list": items}
    if key == "map_value":
        entries = []
        for e in get(v, "entries"):
            k, val = typed(one(e, "key")), typed(one(e, "value"))
            if k is None or val is None:
                return None
            entries.append([k, val])
        return {"map": entries}
    return None


def main(checkout):
    for name in FILES:
        text = subprocess.run(
            ["git", "-C", checkout, "show", f"HEAD:tests/simple/testdata/{name}.textproto"],
            check=True, capture_output=True, text=True).stdout
        root = parse_message(tokens(text), None)
        for section in get(root, "section"):
            for test in get(section, "test"):
                expr = one(test, "expr").decode("utf-8")
                skip = (one(test, "disable_check") == "true" or one(test, "check_only") == "true"
                        or get(test, "bindings") or get(test, "type_env") or one(test, "container")
                        or one(test, "disable_macros") == "true" or EXCLUDED.search(expr))
                if skip:
                    continue
                case = {"file": name, "section": one(section, "name").decode(),
                        "name": one(test, "name").decode(), "expr": expr}
                if one(test, "value") is not None:
                    value = typed(one(test, "value"))
                    if value is None:
                        continue
                    case["value"] = value
                elif one(test, "eval_error") is not None:
                    errs = one(test, "eval_error")
                    msgs = [one(e, "message") for e in get(errs, "errors")]
                    case["error"] = (msgs[0] or b"").decode() if msgs else ""
                else:
                    continue
                print(json.dumps(case, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1])
