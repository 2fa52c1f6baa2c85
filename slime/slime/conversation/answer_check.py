"""Does a reply still answer the request? A check the server can make from the request alone.

The server never knows what a user's hidden preference is, but it can tell a reply that takes up the request
from one that does not: a reply that stops after its opening ("Sure!"), or that drifts into small talk ("Hello
there! I'm here to help you with your homework. What's your question?"). Teacher signals fail exactly this
way: a small model told to open with "Sure!" often writes just that, and told to greet often greets and chats.
Training on such a reply teaches the opening together with the loss of the answer. So a teacher-written reply
is kept only when it passes this check, and a turn where no teacher reply passes while the policy's own one does
loses its teacher term (its hinted teacher answers worse than the policy).

A reply passes when

* it has a body: at least `min_body_words` words after its opening sentence (a one-sentence reply counts whole
  only if it is long enough on its own), or a number of its own (a result: "The answer is 32."), so an opening
  alone never passes; and
* it is about the request: it repeats one of the request's numbers, or at least `min_shared_words` of its
  content words (words of 3+ letters that are not function words), or it is a short reply (at most
  `short_reply_words`) that states a result.

Deliberately simple and language-agnostic beyond English function words; it knows nothing of any persona.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["AnswerCheck", "check_answer"]

_WORD = re.compile(r"[A-Za-z][A-Za-z']*|\d+(?:[.,]\d+)*")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# list markers ("1. First", "2) Then", "Step 1:"): at the start of the reply, a line or a sentence, or after
# "step"; not results
_ENUMERATOR = re.compile(r"(?:^|\n|[.!?:]\s)\s*(\d+)[.)]\s|\bstep\s+(\d+)\b", re.IGNORECASE)
# the opening sentence: up to the first sentence end (., !, ?, :) or line break, within the first 12 words
_OPENING = re.compile(r"^\W*(?:\S+\s+){0,11}?\S*?[.!?:](?=\s|$)|^[ \t]*(?:\S+[ \t]+){0,11}?\S+[ \t]*\n")
_FUNCTION_WORDS = frozenset("""
the and for are but not you all any can had her was one our out his has him how its may new now old see two way
who boy did get let put say she too use yes yet off own why got per via than into
about above after again against also another any because been before being below between both cannot could does
doing down during each either every from further have having here hers herself himself into itself just many more
most much must myself neither once only other ought ours ourselves over same should some such than that their
theirs them themselves then there these they this those through under until upon very what when where which while
whom whose will with within without would your yours yourself yourselves please thanks thank help could can
""".split())


@dataclass(frozen=True)
class AnswerCheck:
    ok: bool
    reason: str  # "" when ok, else what failed: "empty", "opening only", "off topic"
    body_words: int  # words after the opening sentence
    results: tuple[str, ...]  # numbers of the reply that the request does not contain
    shared_numbers: tuple[str, ...]
    shared_words: tuple[str, ...]


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) >= 3 and w[0].isalpha()
            and w.lower() not in _FUNCTION_WORDS}


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


def check_answer(reply: str, request: str, *, min_body_words: int = 8, min_shared_words: int = 2,
                 short_reply_words: int = 25) -> AnswerCheck:
    """Whether `reply` takes up `request` (the user's last message): a body beyond its opening, on topic."""
    text = reply.strip()
    words = _WORD.findall(text)
    if not words:
        return AnswerCheck(False, "empty", 0, (), (), ())
    opening = _OPENING.match(text)
    body = text[opening.end():] if opening and opening.end() < len(text) else ""
    # a reply with no separate opening is all body once it is longer than an opening can be
    body_words = len(_WORD.findall(body)) if body else (len(words) if len(words) >= 12 else 0)
    asked = _numbers(request)
    # results are the numbers the request does not hold, list markers and step labels aside, in the body (a
    # reply that is one short sentence is its own body: "The answer is 32.")
    counted = body if body else text
    markers = [a or b for a, b in _ENUMERATOR.findall(counted)]
    said = [n.replace(",", "") for n in _NUMBER.findall(counted)]
    # a marker's number still counts where the reply also writes it elsewhere ("1. ... is 1 more")
    results = tuple(sorted({n for n in said if n not in asked and said.count(n) > markers.count(n)}))
    shared_numbers = tuple(sorted(asked & _numbers(text)))
    shared_words = tuple(sorted(_content_words(request) & _content_words(text)))
    if body_words < min_body_words and not results:
        return AnswerCheck(False, "opening only", body_words, results, shared_numbers, shared_words)
    on_topic = bool(shared_numbers) or len(shared_words) >= min_shared_words or \
        (bool(results) and len(words) <= short_reply_words)
    if not on_topic:
        return AnswerCheck(False, "off topic", body_words, results, shared_numbers, shared_words)
    return AnswerCheck(True, "", body_words, results, shared_numbers, shared_words)
