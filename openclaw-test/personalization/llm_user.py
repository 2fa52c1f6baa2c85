"""An LLM that plays the persona: what the simulated user says next, written by a model instead of a script.

For GPU runs any model behind an OpenAI-compatible URL (e.g. SGLang serving a 4B instruct model) can play the
user. It only writes the user's next message; the persona's versioned rating function still rates every reply
(the `rating` argument), so the numbers a run reports do not depend on the user model.

The user model sees the conversation from the user's side, with flipped roles: after its role-play system prompt
(`user_prompts.user_system_prompt`), the user's own earlier messages are `assistant` messages and the agent's
replies are `user` messages prefixed "The AI assistant replied:". The last reply carries a private note saying
what the rating decided (the reply meets the preference, does not, or does not answer at all), so the reaction
agrees with the rating. The message is cleaned (reasoning blocks, quotes, role labels) and classified with the
same rules the hint and PRM judges use: a complaint is a correction (the user asks for another attempt where the
conversation allows one), approval is positive, anything else moves on. When the model gives nothing usable (an
HTTP error after the retries, or an empty message) the persona's scripted reaction stands in and is counted in
`fallbacks`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import re
from collections.abc import Mapping

import httpx

from slime.conversation.judges.rules import classify_user_text
from personalization.personas import MET, Persona, Reaction
from personalization.rating import Rating
from personalization.user_prompts import user_system_prompt

__all__ = ["LLMReactor", "build_user_messages", "chat_completions_url", "classify_reaction", "clean_user_message",
           "private_note", "REPLY_PREFIX"]

log = logging.getLogger(__name__)

REPLY_PREFIX = "The AI assistant replied:\n\n"
OPENER = "(You start the chat: send the AI assistant your request.)"
EMPTY_REPLY = "(nothing: the message was empty)"
NOTE_PLEASED = "(Private note: this reply meets your preference.)"
NOTE_NOT_PLEASED = "(Private note: this reply does not meet your preference.)"
NOTE_NO_ANSWER = "(Private note: this reply does not answer your request at all.)"

_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def is_pleased(rating: Rating) -> bool:
    """What the versioned rating says about the reply (the same rule as `Persona.react`, before noise)."""
    return rating.preference >= MET and rating.quality > 0


def private_note(rating: Rating) -> str:
    """The line appended to the last reply so the user model's reaction agrees with the rating."""
    if rating.quality <= 0:
        return NOTE_NO_ANSWER
    return NOTE_PLEASED if is_pleased(rating) else NOTE_NOT_PLEASED


def chat_completions_url(url: str) -> str:
    """The chat completions endpoint of an OpenAI-compatible server given as `http://host:port`, `.../v1` or the
    full `.../v1/chat/completions`."""
    url = url.strip().rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    if url.endswith("/v1"):
        return url + "/chat/completions"
    return url + "/v1/chat/completions"


def _text(content) -> str:
    """A message's text: a plain string, or the text parts of an OpenAI content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content
                       if isinstance(part, dict) and part.get("type", "text") == "text")
    return "" if content is None else str(content)


def build_user_messages(persona: Persona, messages: list[dict], reply: str, rating: Rating) -> list[dict]:
    """The user model's prompt: its role-play system prompt, then the conversation with flipped roles (the
    user's messages as `assistant`, the agent's as `user` with `REPLY_PREFIX`), the last reply ending with the
    rating's private note. The agent's system prompt and tool traffic are not the user's to see."""
    flipped: list[dict] = []
    for message in messages:
        role = message.get("role")
        text = _text(message.get("content"))
        if role == "user":
            flipped.append({"role": "assistant", "content": text})
        elif role == "assistant" and text.strip():
            flipped.append({"role": "user", "content": REPLY_PREFIX + text})
    last = reply if reply.strip() else EMPTY_REPLY
    flipped.append({"role": "user", "content": f"{REPLY_PREFIX}{last}\n\n{private_note(rating)}"})
    opener = [{"role": "user", "content": OPENER}] if flipped[0]["role"] == "assistant" else []
    return [{"role": "system", "content": user_system_prompt(persona)}] + opener + flipped


_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_LABEL = re.compile(r"^(?:\*\*)?(?:the user|user|me|my (?:reply|message|response)|reply|response|message|student"
                    r"|teacher|human|you)(?:\*\*)?\s*:(?:\*\*)?\s*", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_QUOTE_PAIRS = {'"': '"', "'": "'", "“": "”", "‘": "’", "`": "`", "«": "»", "„": "“"}
_DOUBLE_QUOTES = '"“”„«»'


def clean_user_message(text: str | None) -> str:
    """The user's message out of the model's output: reasoning blocks (closed, unclosed, or a stray `</think>`
    whose opening the chat template put in the prompt) and control characters removed, the first paragraph kept,
    whitespace collapsed, and role labels and surrounding quotes stripped. "" when nothing usable is left."""
    text = _THINK_BLOCK.sub(" ", _CONTROL.sub("", text or ""))
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end():]
    text = _THINK_OPEN.split(text, maxsplit=1)[0]
    text = re.split(r"\n\s*\n", text.strip(), maxsplit=1)[0]
    text = " ".join(text.split())
    while True:
        before = text
        text = _LABEL.sub("", text).strip()
        if len(text) >= 2 and _QUOTE_PAIRS.get(text[0]) == text[-1]:
            text = text[1:-1].strip()
        elif text[:1] in _DOUBLE_QUOTES and not any(q in text[1:] for q in _DOUBLE_QUOTES):
            text = text[1:].strip()  # an opening quote cut off by max_tokens
        elif text[-1:] in _DOUBLE_QUOTES and not any(q in text[:-1] for q in _DOUBLE_QUOTES):
            text = text[:-1].strip()
        if text == before:
            return text


def classify_reaction(text: str, can_retry: bool, pleased: bool) -> Reaction:
    """The user model's message as a Reaction: a complaint or correction -> "correction" (asks for another attempt
    where `can_retry`), approval -> "positive", anything else -> "move_on". `pleased` is what the rating said."""
    score = classify_user_text(text).score
    if score < 0:
        return Reaction(text, "correction", wants_retry=can_retry, pleased=pleased)
    if score > 0:
        return Reaction(text, "positive", wants_retry=False, pleased=pleased)
    return Reaction(text, "move_on", wants_retry=False, pleased=pleased)


class LLMReactor:
    """A `simulate.Reactor` whose messages an LLM writes (see the module docstring)."""

    def __init__(self, url: str, *, model: str = "default", api_key: str | None = None, temperature: float = 0.7,
                 max_tokens: int = 96, timeout: float = 120.0, retries: int = 2, retry_delay: float = 1.0,
                 extra_body: Mapping | None = None, transport: httpx.AsyncBaseTransport | None = None):
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.endpoint = chat_completions_url(url)
        self.model = model
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.retries = int(retries)
        self.retry_delay = float(retry_delay)
        self.extra_body = dict(extra_body or {})  # e.g. {"chat_template_kwargs": {"enable_thinking": False}}
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.AsyncClient(headers=headers, timeout=timeout, transport=transport)
        self.calls = 0  # reactions asked of the model
        self.requests = 0  # HTTP requests sent (retries included)
        self.errors = 0  # failed HTTP requests
        self.fallbacks = 0  # reactions the persona's script wrote instead
        self.last_error: str | None = None

    @classmethod
    def from_config(cls, user: Mapping) -> LLMReactor:
        """From openclaw-test's `user` config group (`conf/user/llm.yaml`); `api_key` defaults to
        $USER_LLM_API_KEY."""
        from personalization.runner import plain_config  # (runner imports this module lazily)

        user = plain_config(user or {})
        if not user.get("url"):
            raise ValueError("user.url (the user model's OpenAI-compatible URL) is required for user.kind=llm")
        options = {key: user[key] for key in ("temperature", "max_tokens", "timeout", "retries", "retry_delay",
                                               "extra_body") if user.get(key) is not None}
        return cls(str(user["url"]), model=str(user.get("model") or "default"),
                   api_key=user.get("api_key") or os.environ.get("USER_LLM_API_KEY"), **options)

    async def react(self, persona: Persona, rating: Rating, rng: random.Random, can_retry: bool,
                    messages: list[dict], reply: str) -> Reaction:
        self.calls += 1
        pleased = is_pleased(rating)
        seed = rng.randrange(2**31)  # drawn every time, so the rng advances the same whatever the server does
        prompt = build_user_messages(persona, messages, reply, rating)
        try:
            text = clean_user_message(await self.complete(prompt, seed))
            reason = "empty message"
        except Exception as exc:  # the user model is down or broken: the script stands in, the run goes on
            text, reason = "", f"{type(exc).__name__}: {exc}"
            self.last_error = reason
        if text:
            return classify_reaction(text, can_retry, pleased)
        self.fallbacks += 1
        if self.fallbacks <= 3 or self.fallbacks % 100 == 0:
            log.warning("user LLM at %s gave nothing usable (%s); scripted reaction used (%d so far)",
                        self.endpoint, reason[:300], self.fallbacks)
        return persona.react(rating, rng, can_retry)

    def request_body(self, messages: list[dict], seed: int) -> dict:
        return {**self.extra_body, "model": self.model, "messages": messages, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "seed": seed}

    async def complete(self, messages: list[dict], seed: int) -> str:
        """The model's raw message (content only; reasoning a server split off is not the user's words). Retries
        transport errors, timeouts and overload/server statuses `retries` times; raises when all attempts fail."""
        body = self.request_body(messages, seed)
        for attempt in range(self.retries + 1):
            self.requests += 1
            try:
                response = await self.http.post(self.endpoint, json=body)
                if response.status_code >= 400:
                    raise httpx.HTTPStatusError(f"HTTP {response.status_code}: {response.text[:300]}",
                                                request=response.request, response=response)
                message = response.json()["choices"][0]["message"]
                return _text(message.get("content"))
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
                self.errors += 1
                retryable = not isinstance(exc, httpx.HTTPStatusError) or exc.response.status_code in _RETRY_STATUS
                if attempt >= self.retries or not retryable:
                    raise
                await asyncio.sleep(self.retry_delay * (attempt + 1))
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        await self.http.aclose()
