import json
import subprocess
import sys
import tempfile
from pathlib import Path


def merged(base, override):
    with tempfile.TemporaryDirectory() as d:
        b, o = Path(d, "b.json"), Path(d, "o.json")
        b.write_text(json.dumps(base))
        o.write_text(json.dumps(override))
        out = subprocess.run([sys.executable, "/app/merge_config.py", str(b), str(o)], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_nested_objects_merged_key_by_key():
    out = merged({"db": {"host": "localhost", "port": 5432}, "debug": False}, {"db": {"port": 6543}, "debug": True})
    assert json.loads(out) == {"db": {"host": "localhost", "port": 6543}, "debug": True}


def test_deep_nesting_and_lists_replaced():
    base = {"a": {"b": {"c": 1, "d": [1, 2]}, "e": "x"}, "tags": ["x", "y"]}
    override = {"a": {"b": {"d": [3], "f": {"g": 2}}}, "tags": ["z"]}
    assert json.loads(merged(base, override)) == {"a": {"b": {"c": 1, "d": [3], "f": {"g": 2}}, "e": "x"}, "tags": ["z"]}


def test_null_removes_keys_at_any_depth():
    base = {"a": {"keep": 1, "drop": 2}, "gone": True, "stay": 0}
    override = {"a": {"drop": None}, "gone": None, "new": None}
    assert json.loads(merged(base, override)) == {"a": {"keep": 1}, "stay": 0}


def test_output_is_sorted_json_with_indent_2():
    base = {"z": {"x": 1}, "a": 1}
    out = merged(base, {"z": {"y": 2}})
    assert out == json.dumps({"a": 1, "z": {"x": 1, "y": 2}}, indent=2, sort_keys=True) + "\n"
