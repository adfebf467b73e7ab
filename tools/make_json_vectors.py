"""Writes models-ir/json/vectors.json: what Python's json module does with tricky inputs, the
independent reference of Tests/JSONTests. Run: tools/.venv/bin/python tools/make_json_vectors.py
(any CPython 3 works; the standard library only)."""
import json, os

strings = ["plain", "quote \" and backslash \\", "tab\tnewline\nreturn\r", "\b\f\x00\x1f\x7f",
           "é ü 中文", "emoji 😀 and 𝄞", "slash / stays", "\u2028 line separator", ""]
quote = [{"s": s, "ascii": json.dumps(s, ensure_ascii=True), "utf8": json.dumps(s, ensure_ascii=False)} for s in strings]

docs = [
    '{"b": 1, "a": [true, false, null], "c": {"z": 1.5, "y": -2, "x": "s"}}',
    '{"dup": 1, "k": 2, "dup": 3}',
    '[1, -0, 1e3, 2.5E-3, 0.1, -7, 1.5e300]',
    '"\\u00e9\\ud83d\\ude00\\n"',
    '  {"nested": [[[]], {}, [{"a": {}}]]}  ',
]
parsed = []
for d in docs:
    pairs = json.loads(d, object_pairs_hook=lambda p: {"__keys__": [k for k, _ in p], **dict(p)})
    def keys_in_order(v):
        if isinstance(v, dict):
            return {"keys": v["__keys__"], "values": {k: keys_in_order(x) for k, x in v.items() if k != "__keys__"}}
        if isinstance(v, list):
            return [keys_in_order(x) for x in v]
        return v
    value = json.loads(d)
    parsed.append({"text": d, "canonical": json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")),
                   "order": keys_in_order(pairs)})

bad = []
for d in ['{"a": 1,}', '[1, 2', '{"a" 1}', '\n\n  {"x": tru}', '"unterminated', '{"a": 1} trailing', '[01]', '[1.]', '[-]', '[.5]', '[1e]', '{"a":1}}', '\t[\n1,\n2,\n]', '["a\tb"]', '\n["new\nline"]', '']:
    try:
        json.loads(d)
        raise SystemExit("expected an error for %r" % d)
    except json.JSONDecodeError as e:
        bad.append({"text": d, "lineno": e.lineno})

out = os.path.join(os.path.dirname(__file__), "..", "models-ir", "json", "vectors.json")
with open(out, "w") as f:
    json.dump({"quote": quote, "parse": parsed, "bad": bad}, f, indent=1, ensure_ascii=True)
print("wrote", out)
