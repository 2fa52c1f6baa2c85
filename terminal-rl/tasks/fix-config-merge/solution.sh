#!/bin/bash
cd /app
python3 - <<'PY'
src = open("merge_config.py").read()
old = '''def merge(base, override):
    result = dict(base)
    for key, value in override.items():
        result[key] = value
    return result
'''
new = '''def merge(base, override):
    result = dict(base)
    for key, value in override.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge(result[key], value)
        else:
            result[key] = value
    return result
'''
assert old in src
open("merge_config.py", "w").write(src.replace(old, new))
PY
