"""Does inference from the request body say what the client's own tags say?

A client with the `rl-training-headers` OpenClaw plugin tags every request with its session and main/side kind.
The proxy trusts those tags, and also classifies the request by inference (`sessions.resolve_meta` keeps it in
`meta.inferred`), so every tagged request is a labelled example of how inference does on real traffic. Counted:

* turn type: header main/side against inferred main/side, with the (header reason, inferred reason) pairs of
  the disagreements (`side:compaction -> main:unclassified`, ...);
* session, per request: the header's session id against the inferred one (`openclaw:<id>` from the Runtime line,
  or `prefix:<hash>`); a header id without the `openclaw:` prefix matches its prefixed inferred form too;
* session, over time: header sessions whose requests inference spread over several sessions (`split`: e.g. a
  compaction request, which carries no Runtime line) and inferred sessions that several header sessions fell
  into (`merged`: two conversations with the same opening and no Runtime line).

`/v1/stats` shows the counts under `proxy.header_check`, with the last few disagreements as examples. Memory is
bounded: the session maps keep the most recent `max_sessions` entries.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict, deque

from slime.conversation.sessions import RUNTIME_SESSION_PREFIX, RequestMeta


def same_session(header_id: str, inferred_id: str) -> bool:
    return inferred_id == header_id or inferred_id == RUNTIME_SESSION_PREFIX + header_id


class HeaderCheck:
    def __init__(self, max_examples: int = 10, max_sessions: int = 4096, max_ids_per_session: int = 8):
        self.max_sessions = max_sessions
        self.max_ids = max_ids_per_session
        self.requests = 0
        self.turn_type = Counter()  # agree / disagree
        self.turn_pairs = Counter()  # "header_type:reason -> inferred_type:reason" of the disagreements
        self.session = Counter()  # agree / disagree
        self.by_header: OrderedDict[str, set[str]] = OrderedDict()  # header session -> inferred ids seen
        self.by_inferred: OrderedDict[str, set[str]] = OrderedDict()  # inferred id -> header sessions seen
        self.split: set[str] = set()
        self.merged: set[str] = set()
        self.examples: deque[dict] = deque(maxlen=max_examples)

    def _remember(self, table: OrderedDict, key: str, value: str) -> set[str]:
        seen = table.get(key)
        if seen is None:
            seen = table[key] = set()
            while len(table) > self.max_sessions:
                table.popitem(last=False)
        else:
            table.move_to_end(key)
        if len(seen) < self.max_ids:
            seen.add(value)
        return seen

    def observe(self, meta: RequestMeta) -> dict | None:
        """Count one request; returns the disagreement (also kept as an example) or None."""
        inferred = meta.inferred
        if inferred is None:
            return None
        self.requests += 1
        what = []
        if meta.explicit_turn_type:
            if meta.turn_type == inferred.turn_type:
                self.turn_type["agree"] += 1
            else:
                self.turn_type["disagree"] += 1
                header = f"{meta.turn_type}:{meta.client_reason or meta.turn_reason}"
                self.turn_pairs[f"{header} -> {inferred.turn_type}:{inferred.turn_reason}"] += 1
                what.append("turn_type")
        if meta.session_source in ("header", "body"):
            if same_session(meta.session_id, inferred.session_id):
                self.session["agree"] += 1
            else:
                self.session["disagree"] += 1
                what.append("session")
            if len(self._remember(self.by_header, meta.session_id, inferred.session_id)) > 1:
                self.split.add(meta.session_id)
            if len(self._remember(self.by_inferred, inferred.session_id, meta.session_id)) > 1:
                self.merged.add(inferred.session_id)
            for ids in (self.split, self.merged):
                if len(ids) > self.max_sessions:
                    ids.pop()
        if not what:
            return None
        example = {
            "time": round(time.time(), 3), "disagree": what,
            "header": {"session_id": meta.session_id, "turn_type": meta.turn_type if meta.explicit_turn_type else None,
                       "reason": meta.client_reason, "turn_id": meta.turn_id},
            "inferred": {"session_id": inferred.session_id, "session_source": inferred.session_source,
                         "turn_type": inferred.turn_type, "reason": inferred.turn_reason},
        }
        self.examples.append(example)
        return example

    def snapshot(self) -> dict:
        return {
            "requests": self.requests,
            "turn_type": {"agree": self.turn_type["agree"], "disagree": self.turn_type["disagree"],
                          "disagreements": dict(self.turn_pairs.most_common(20))},
            "session": {"agree": self.session["agree"], "disagree": self.session["disagree"],
                        "split_sessions": len(self.split), "merged_sessions": len(self.merged)},
            "recent_disagreements": list(self.examples),
        }
