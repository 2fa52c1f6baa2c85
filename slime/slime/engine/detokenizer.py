"""Incremental detokenisation: turn a growing list of token ids into text without re-decoding everything.

Byte-level BPE tokens can end in the middle of a UTF-8 character, so text is only committed once the
decoded window no longer ends in a replacement character. Decoding a short window keeps the cost per token constant, and keeps the leading-space and
merge behaviour of the tokenizer's decoder identical to decoding the whole sequence: the window
starts at the previously committed token, whose own text is subtracted again.
"""

from __future__ import annotations

class IncrementalDetokenizer:
    def __init__(self, tokenizer, skip_special_tokens: bool = True):
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self.ids: list[int] = []
        self.text = ""
        self._prefix_offset = 0  # window start: tokens before it are never decoded again
        self._read_offset = 0  # tokens before it are already reflected in self.text

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens)

    def add(self, token_id: int) -> str:
        """Append one token; return the newly committed text (possibly empty)."""
        self.ids.append(token_id)
        prefix = self._decode(self.ids[self._prefix_offset : self._read_offset])
        full = self._decode(self.ids[self._prefix_offset :])
        if full.endswith("\ufffd") or len(full) < len(prefix) or not full.startswith(prefix):
            return ""
        delta = full[len(prefix) :]
        self.text += delta
        self._prefix_offset = self._read_offset
        self._read_offset = len(self.ids)
        return delta

    def flush(self) -> str:
        """At the end of generation, commit whatever is left (a dangling partial character included)."""
        prefix = self._decode(self.ids[self._prefix_offset : self._read_offset])
        full = self._decode(self.ids[self._prefix_offset :])
        delta = full[len(prefix) :] if full.startswith(prefix) else ""
        self.text += delta
        self._read_offset = len(self.ids)
        return delta
