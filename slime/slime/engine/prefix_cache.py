"""Reuse the KV of earlier sequences for prompts that start with them (multi-turn chat, retries, n > 1).

A deliberately small design: finished sequences are kept whole (one unpadded single-row cache each),
looked up by longest common token prefix, and evicted least-recently-used under a token budget. A
conversation proxy resends the whole history every turn, so turn k+1's prompt extends turn k's prompt
plus response and skips that part of the prefill. Entries are dropped on every weight update: a cache
computed by old weights must never serve a request tagged with the new version.
"""

from __future__ import annotations

from collections import OrderedDict

from slime.engine.kv_cache import BatchKVCache


def common_prefix_length(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PrefixCache:
    def __init__(self, max_tokens: int, min_tokens: int = 16):
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self._entries: OrderedDict[tuple[int, ...], BatchKVCache] = OrderedDict()
        self._tokens = 0
        self.hits = 0
        self.lookups = 0

    @property
    def enabled(self) -> bool:
        return self.max_tokens > 0

    @property
    def size_tokens(self) -> int:
        return self._tokens

    def insert(self, token_ids: list[int], cache: BatchKVCache):
        """Keep `cache` (single row, exactly len(token_ids) positions) for future prompts."""
        if not self.enabled or len(token_ids) < self.min_tokens or len(token_ids) > self.max_tokens:
            return
        key = tuple(token_ids)
        if key in self._entries:
            self._entries.move_to_end(key)
            return
        # an entry that is a prefix of the new one is redundant: the new one serves every prompt it served
        for old in [k for k in self._entries if len(k) <= len(key) and key[: len(k)] == k]:
            self._drop(old)
        self._entries[key] = cache
        self._tokens += len(key)
        while self._tokens > self.max_tokens and self._entries:
            self._drop(next(iter(self._entries)))

    def lookup(self, prompt_ids: list[int], max_reuse: int) -> tuple[int, BatchKVCache | None]:
        """Longest cached prefix of `prompt_ids`, at most `max_reuse` tokens: (length, fresh single-row cache)."""
        if not self.enabled or max_reuse < self.min_tokens:
            return 0, None
        self.lookups += 1
        best_key, best_len = None, 0
        for key in self._entries:
            n = common_prefix_length(list(key[: max_reuse]), prompt_ids[:max_reuse])
            if n > best_len:
                best_key, best_len = key, n
        if best_key is None or best_len < self.min_tokens:
            return 0, None
        self._entries.move_to_end(best_key)
        self.hits += 1
        return best_len, self._entries[best_key].truncated_copy(best_len)

    def clear(self):
        self._entries.clear()
        self._tokens = 0

    def _drop(self, key):
        del self._entries[key]
        self._tokens -= len(key)
