"""Reading the JSON of a model's tool call: lenient about raw newlines, strict about text no program can carry.

JSON's `\\udXXX` escapes can spell an unpaired UTF-16 surrogate, which Python holds in a str but which no UTF-8
encoder writes: left in a tool's arguments it raised UnicodeEncodeError deep in the environment client (when the
request was sent), ending the episode instead of telling the policy its call was malformed. Such a call is a parse
error like any other malformed JSON (the caller's `except ValueError` path).
"""

from __future__ import annotations

import json
from typing import Any


def loads_tool_json(text: str) -> Any:
    """`json.loads(text, strict=False)`, refusing (ValueError) a value that holds an unpaired surrogate."""
    value = json.loads(text, strict=False)
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        bad = e.object[e.start:e.end]
        raise ValueError(f"the JSON holds an unpaired surrogate ({ascii(bad)[1:-1]}), which no text can contain") \
            from None
    return value
