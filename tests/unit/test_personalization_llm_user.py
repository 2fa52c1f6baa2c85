"""The LLM-played user: role-play prompts, the flipped-role view of the conversation with the rating's private
note, cleaning the model's output, classifying it into reaction kinds, and the scripted fallback when the user
model fails (httpx's in-process MockTransport stands in for the server only on that path and to check the
request's shape; tests/integration/test_personalization_llm_user.py talks to a real engine)."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import httpx
import pytest

from personalization.llm_user import (
    EMPTY_REPLY,
    NOTE_NO_ANSWER,
    NOTE_NOT_PLEASED,
    NOTE_PLEASED,
    OPENER,
    REPLY_PREFIX,
    LLMReactor,
    build_user_messages,
    chat_completions_url,
    classify_reaction,
    clean_user_message,
    private_note,
)
from personalization.personas import MET, PERSONAS, Persona, Reaction
from personalization.rating import Rating
from personalization.runner import build_reactor
from personalization.user_prompts import USER_PROMPTS, user_system_prompt

ROOT = Path(__file__).resolve().parents[2]
CONCISE = PERSONAS["concise"]
GOOD = Rating(preference=1.0, quality=1.0, details={})
BAD = Rating(preference=0.2, quality=1.0, details={})
NO_ANSWER = Rating(preference=1.0, quality=0.0, details={})  # "perfectly concise" but empty
HISTORY = [{"role": "system", "content": "You are a helpful assistant."},
           {"role": "user", "content": "quick question: what is 3 + 4?"},
           {"role": "assistant", "content": "To solve this problem, we add 3 and 4, which gives 7 in total."},
           {"role": "user", "content": "too long, one sentence please"}]


def _run(coro):
    return asyncio.run(coro)


# -- prompts --------------------------------------------------------------------------------------------------

def test_every_persona_has_its_own_role_play_prompt():
    assert set(USER_PROMPTS) == set(PERSONAS)
    for name, persona in PERSONAS.items():
        prompt = user_system_prompt(persona)
        assert prompt == USER_PROMPTS[name]
        assert "role-playing" in prompt and "AI assistant" in prompt
        assert "Never solve the task" in prompt and "ONE short chat message" in prompt
        assert "no role labels, no quotation marks" in prompt
        assert "thank or praise" in prompt and "try again" in prompt and "move on" in prompt
        assert persona.hint not in prompt  # written in the prompt's own words, not the hint pasted in
    student, teacher = USER_PROMPTS["student"], USER_PROMPTS["teacher"]
    assert "student" in student and "bold" in student and "Final answer" in student and "working" in student
    assert "friendly" in teacher and "specific" in teacher and "grading comments" in teacher
    assert "one short sentence" in USER_PROMPTS["concise"] and "greeting" in USER_PROMPTS["greeter"]


def test_an_unknown_persona_gets_a_generic_prompt_from_its_description():
    persona = Persona(name="pirate", description="a user who wants every answer to end with 'arr'.",
                      preference_kind="tone", rating_version="pirate-v1", hint="End with arr.",
                      requests=("{question}",), corrections=("say arr",))
    prompt = user_system_prompt(persona)
    assert "You are a user who wants every answer to end with 'arr'." in prompt
    assert "ONE short chat message" in prompt and "Never solve the task" in prompt


# -- the user model's view ---------------------------------------------------------------------------------------

def test_the_conversation_is_seen_with_flipped_roles_and_a_private_note_on_the_last_reply():
    messages = build_user_messages(CONCISE, HISTORY, "It is 7.", GOOD)
    assert messages[0] == {"role": "system", "content": USER_PROMPTS["concise"]}
    assert messages[1] == {"role": "user", "content": OPENER}  # chat templates that want a user turn first
    # the agent's system prompt is not the user's to see; the user's messages are the model's own
    assert [m["role"] for m in messages[2:]] == ["assistant", "user", "assistant", "user"]
    assert messages[2]["content"] == "quick question: what is 3 + 4?"
    assert messages[3]["content"] == REPLY_PREFIX + HISTORY[2]["content"]  # earlier replies carry no note
    assert messages[4]["content"] == "too long, one sentence please"
    assert messages[5]["content"] == f"The AI assistant replied:\n\nIt is 7.\n\n{NOTE_PLEASED}"
    assert sum("Private note" in m["content"] for m in messages) == 1


@pytest.mark.parametrize("rating, note", [
    (GOOD, NOTE_PLEASED),
    (Rating(MET, 0.5, {}), NOTE_PLEASED),  # MET is enough, and quality need only be above 0
    (Rating(MET - 0.01, 1.0, {}), NOTE_NOT_PLEASED),
    (BAD, NOTE_NOT_PLEASED),
    (NO_ANSWER, NOTE_NO_ANSWER),
])
def test_the_private_note_follows_the_rating(rating, note):
    assert private_note(rating) == note
    last = build_user_messages(CONCISE, HISTORY[:2], "reply", rating)[-1]
    assert last["role"] == "user" and last["content"].endswith("\n\n" + note)
    assert ("does not" in note) == (not (rating.preference >= MET and rating.quality > 0))


def test_empty_replies_and_content_parts():
    history = [{"role": "user", "content": [{"type": "text", "text": "hello "}, {"type": "text", "text": "there"}]},
               {"role": "assistant", "content": None, "tool_calls": [{"id": "x"}]},
               {"role": "tool", "content": "tool output"}]
    messages = build_user_messages(CONCISE, history, "   ", NO_ANSWER)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == "hello there"
    assert messages[3]["content"] == f"{REPLY_PREFIX}{EMPTY_REPLY}\n\n{NOTE_NO_ANSWER}"


def test_no_opener_when_the_history_starts_with_an_agent_message():
    messages = build_user_messages(CONCISE, [{"role": "assistant", "content": "Hi! How can I help?"}], "ok", GOOD)
    assert [m["role"] for m in messages] == ["system", "user", "user"]
    assert OPENER not in [m["content"] for m in messages]


@pytest.mark.parametrize("url, endpoint", [
    ("http://127.0.0.1:30001/v1", "http://127.0.0.1:30001/v1/chat/completions"),
    ("http://127.0.0.1:30001/v1/", "http://127.0.0.1:30001/v1/chat/completions"),
    ("http://127.0.0.1:30001", "http://127.0.0.1:30001/v1/chat/completions"),
    ("http://host/v1/chat/completions", "http://host/v1/chat/completions"),
    ("https://api.example.com/openai/v1", "https://api.example.com/openai/v1/chat/completions"),
])
def test_urls_with_or_without_v1(url, endpoint):
    assert chat_completions_url(url) == endpoint


# -- cleaning and classifying --------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, cleaned", [
    ("thanks, that's perfect!", "thanks, that's perfect!"),
    ("  \n too long, one sentence please \n ", "too long, one sentence please"),
    ("<think>The reply is long, I should complain.</think>\n\ntoo long, one sentence please",
     "too long, one sentence please"),
    ("<THINK>a\nb</THINK>ok <think>more</think>thanks", "ok thanks"),
    ("the template opened it</think>\nnice, thanks", "nice, thanks"),  # reasoning opened by the chat template
    ("great thanks <think>still thinking when max_tokens ran o", "great thanks"),
    ('"too long, one sentence please"', "too long, one sentence please"),
    ("“shorter please”", "shorter please"),
    ("'ok'", "ok"),
    ('"shorter please, just the ans', "shorter please, just the ans"),  # quote cut off by max_tokens
    ('User: "you could at least say hi first"', "you could at least say hi first"),
    ("**Student:** this looks way too AI lol", "this looks way too AI lol"),
    ("she said \"hi\" to me", 'she said "hi" to me'),  # quotes inside the message stay
    ("it's fine, thanks", "it's fine, thanks"),
    ("shorter please\n\n(I said this because the reply was long.)", "shorter please"),
    ("no   bold,\nno lists", "no bold, no lists"),
    ("\n\n\n\n\n\nreduce", "reduce"),  # what the random tiny model writes
    ("\n\n\x01\x01\x01", ""), ("ok\x7f\x00 thanks", "ok thanks"),
    ("", ""), (None, ""), ("   \n\n ", ""), ("<think>only reasoning</think>", ""), ('""', ""), ("<think>", ""),
])
def test_cleaning_the_models_output(raw, cleaned):
    assert clean_user_message(raw) == cleaned


@pytest.mark.parametrize("text, kind", [
    ("too long, one sentence please", "correction"),
    ("this looks way too AI-written, no bold and no lists", "correction"),
    ("can you try that again?", "correction"),
    ("that's a bit cold, be friendlier and name the numbers", "correction"),
    ("thanks, that's perfect!", "positive"),
    ("great, thank you", "positive"),
    ("ok", "move_on"),
    ("what about the next one?", "move_on"),
])
@pytest.mark.parametrize("can_retry", [True, False])
def test_classifying_the_message(text, kind, can_retry):
    reaction = classify_reaction(text, can_retry, pleased=kind == "positive")
    assert reaction == Reaction(text, kind, wants_retry=kind == "correction" and can_retry,
                                pleased=kind == "positive")


def test_pleased_comes_from_the_rating_not_from_the_message():
    assert classify_reaction("thanks!", True, pleased=False).pleased is False
    assert classify_reaction("too long", True, pleased=True) == Reaction("too long", "correction", True, True)


# -- the HTTP side (in-process transport) -----------------------------------------------------------------------------

def _reactor(handler, **kwargs) -> LLMReactor:
    return LLMReactor(kwargs.pop("url", "http://user-llm:30001/v1"), transport=httpx.MockTransport(handler),
                      retry_delay=0.0, **kwargs)


def _completion(content) -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                                  "finish_reason": "stop"}]})


def _react(reactor, rating=BAD, seed=5, can_retry=True, messages=HISTORY, reply="It is 7 because 3 + 4 = 7."):
    async def go():
        try:
            return await reactor.react(CONCISE, rating, random.Random(seed), can_retry, messages, reply)
        finally:
            await reactor.aclose()

    return _run(go())


def test_the_request_shape_and_a_used_reaction():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _completion('"way too long, just the number please"')

    reactor = _reactor(handler, model="Qwen3-4B", api_key="sk-user", temperature=0.5, max_tokens=64,
                       extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    reaction = _react(reactor)
    assert reaction == Reaction("way too long, just the number please", "correction", wants_retry=True, pleased=False)
    assert (reactor.calls, reactor.requests, reactor.errors, reactor.fallbacks) == (1, 1, 0, 0)
    (request,) = seen
    assert request.method == "POST" and str(request.url) == "http://user-llm:30001/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-user"
    body = json.loads(request.content)
    assert set(body) == {"model", "messages", "temperature", "max_tokens", "seed", "chat_template_kwargs"}
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("Qwen3-4B", 0.5, 64)
    assert body["seed"] == random.Random(5).randrange(2**31)  # from the conversation's rng: reproducible
    assert body["messages"] == build_user_messages(CONCISE, HISTORY, "It is 7 because 3 + 4 = 7.", BAD)


def test_the_seed_follows_the_rng_and_no_key_means_no_auth_header():
    seeds, auth = [], []

    def handler(request: httpx.Request) -> httpx.Response:
        seeds.append(json.loads(request.content)["seed"])
        auth.append(request.headers.get("authorization"))
        return _completion("thanks!")

    for seed in (1, 1, 2):
        assert _react(_reactor(handler), rating=GOOD, seed=seed).kind == "positive"
    assert seeds[0] == seeds[1] != seeds[2] and auth == [None, None, None]


def _scripted(rating, seed, can_retry):
    """What the persona's script says with the rng where the reactor leaves it (after drawing the seed)."""
    rng = random.Random(seed)
    rng.randrange(2**31)
    return CONCISE.react(rating, rng, can_retry)


@pytest.mark.parametrize("status, requests", [(503, 3), (500, 3), (429, 3), (400, 1), (401, 1), (404, 1)])
def test_http_errors_fall_back_to_the_script_after_two_retries(status, requests):
    reactor = _reactor(lambda request: httpx.Response(status, json={"error": {"message": "nope"}}))
    reaction = _react(reactor, rating=BAD, seed=11)
    assert reaction == _scripted(BAD, 11, True)
    assert (reactor.calls, reactor.requests, reactor.errors, reactor.fallbacks) == (1, requests, requests, 1)
    assert str(status) in reactor.last_error


def test_transport_errors_and_garbage_are_retried_then_fall_back():
    def refused(request):
        raise httpx.ConnectError("connection refused", request=request)

    reactor = _reactor(refused)
    assert _react(reactor, rating=NO_ANSWER, seed=3, can_retry=False) == _scripted(NO_ANSWER, 3, False)
    assert (reactor.requests, reactor.fallbacks) == (3, 1) and "ConnectError" in reactor.last_error

    reactor = _reactor(lambda request: httpx.Response(200, text="not json"))
    assert _react(reactor, seed=4) == _scripted(BAD, 4, True)
    assert (reactor.requests, reactor.fallbacks) == (3, 1)

    reactor = _reactor(lambda request: httpx.Response(200, json={"choices": []}))
    assert _react(reactor, seed=4) == _scripted(BAD, 4, True)
    assert (reactor.requests, reactor.fallbacks) == (3, 1)


def test_a_retry_that_succeeds_is_no_fallback():
    answers = iter([httpx.Response(503), httpx.Response(502), _completion("hm ok")])
    reactor = _reactor(lambda request: next(answers))
    assert _react(reactor, rating=BAD) == Reaction("hm ok", "move_on", wants_retry=False, pleased=False)
    assert (reactor.requests, reactor.errors, reactor.fallbacks) == (3, 2, 0)


@pytest.mark.parametrize("content", ["", None, "   \n", "<think>they want it shorter</think>", '""'])
def test_an_empty_message_falls_back_without_retrying(content):
    reactor = _reactor(lambda request: _completion(content))
    assert _react(reactor, rating=GOOD, seed=8) == _scripted(GOOD, 8, True)
    assert (reactor.requests, reactor.errors, reactor.fallbacks) == (1, 0, 1)


def test_fallbacks_are_counted_across_reactions():
    reactor = _reactor(lambda request: _completion(""))

    async def go():
        try:
            for i in range(4):
                await reactor.react(CONCISE, GOOD, random.Random(i), True, HISTORY, "7")
        finally:
            await reactor.aclose()

    _run(go())
    assert (reactor.calls, reactor.fallbacks) == (4, 4)


# -- configuration -------------------------------------------------------------------------------------------------

def test_from_the_shipped_config_group(monkeypatch):
    from omegaconf import OmegaConf

    monkeypatch.setenv("USER_LLM_API_KEY", "sk-from-env")
    config = OmegaConf.load(ROOT / "openclaw-test" / "conf" / "user" / "llm.yaml")
    reactor = build_reactor(config)
    try:
        assert isinstance(reactor, LLMReactor)
        assert reactor.endpoint == "http://127.0.0.1:30001/v1/chat/completions"
        assert (reactor.model, reactor.temperature, reactor.max_tokens) == ("default", 0.7, 96)
        assert reactor.http.headers["authorization"] == "Bearer sk-from-env"
    finally:
        _run(reactor.aclose())


def test_config_overrides_and_errors(monkeypatch):
    monkeypatch.delenv("USER_LLM_API_KEY", raising=False)
    reactor = LLMReactor.from_config({"kind": "llm", "url": "http://h:1", "model": "m", "api_key": None,
                                      "temperature": 1, "max_tokens": 32, "retries": 0, "timeout": 5})
    try:
        assert reactor.endpoint == "http://h:1/v1/chat/completions" and reactor.retries == 0
        assert isinstance(reactor.temperature, float) and reactor.max_tokens == 32
        assert "authorization" not in reactor.http.headers
    finally:
        _run(reactor.aclose())
    monkeypatch.setenv("USER_LLM_API_KEY", "sk-env")
    reactor = LLMReactor.from_config({"url": "http://h:1/v1", "api_key": "sk-explicit"})
    try:
        assert reactor.http.headers["authorization"] == "Bearer sk-explicit"
    finally:
        _run(reactor.aclose())
    with pytest.raises(ValueError, match="user.url"):
        LLMReactor.from_config({"kind": "llm", "url": None})
    with pytest.raises(ValueError, match="retries"):
        LLMReactor("http://h:1", retries=-1)
