"""The LLM-played user against real engine processes: the flipped-role prompt goes through the real chat
template and sampling, and the message that comes back is cleaned and classified.

* a tiny model fine-tuned to answer two user-model prompts (the reply meets the preference -> thanks, it does not
  -> a correction; cached, seconds to build) gives the full path with known answers;
* the random tiny model (`engine_server`) mostly writes blank lines: each reaction is either the engine's own
  seeded sample (checked by asking the engine the same request by hand) or, when nothing usable came back, the
  persona's script, counted in `fallbacks`;
* a dead user model falls back to the script after the retries.

The bare engine has no /v1/feedback for `simulate.converse`, so these call `LLMReactor.react` directly, the way
`converse` does after rating a reply."""

from __future__ import annotations

import asyncio
import random

import httpx
import pytest

from helpers.memorised_model import EOS, build_memorised_model
from personalization.llm_user import LLMReactor, build_user_messages, classify_reaction, clean_user_message
from personalization.personas import PERSONAS, Reaction
from personalization.rating import Rating

CONCISE = PERSONAS["concise"]
HISTORY = [{"role": "system", "content": "You are a helpful assistant."},
           {"role": "user", "content": "quick question: what is 3 + 4?"}]
SHORT_REPLY = "3 + 4 is 7."
LONG_REPLY = "To solve this problem, we add 3 and 4. Three plus four makes seven, so the answer is 7."
PLEASED = Rating(1.0, 1.0, {})
NOT_PLEASED = Rating(0.2, 1.0, {})
THANKS = '"thanks, that\'s perfect!"'  # quoted, as small models like to: the reactor strips the quotes
CORRECTION = "too long, one sentence please"


def _react_all(reactor: LLMReactor, calls: list[tuple]) -> list[Reaction]:
    async def go():
        try:
            return [await reactor.react(persona, rating, random.Random(seed), can_retry, messages, reply)
                    for persona, rating, seed, can_retry, messages, reply in calls]
        finally:
            await reactor.aclose()

    return asyncio.run(go())


# --------------------------------------------------------------------------------------------------
# A tiny "user model" that memorised its reactions to two prompts
# --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def user_engine(tmp_path_factory):
    from slime.engine.launch import EngineProcess

    examples = [(build_user_messages(CONCISE, HISTORY, SHORT_REPLY, PLEASED), THANKS + EOS),
                (build_user_messages(CONCISE, HISTORY, LONG_REPLY, NOT_PLEASED), CORRECTION + EOS)]
    log = tmp_path_factory.mktemp("user-engine") / "engine.log"
    with EngineProcess(build_memorised_model("user-model", examples), log_path=log, ready_timeout=120) as server:
        yield server


def test_the_user_model_thanks_and_corrects_through_the_real_engine(user_engine):
    reactor = LLMReactor(user_engine.url + "/v1", model="default", temperature=0.6, max_tokens=32, timeout=60)
    reactions = _react_all(reactor, [(CONCISE, PLEASED, 1, True, HISTORY, SHORT_REPLY),
                                     (CONCISE, NOT_PLEASED, 2, True, HISTORY, LONG_REPLY),
                                     (CONCISE, NOT_PLEASED, 3, False, HISTORY, LONG_REPLY)])
    assert reactions == [Reaction("thanks, that's perfect!", "positive", wants_retry=False, pleased=True),
                         Reaction(CORRECTION, "correction", wants_retry=True, pleased=False),
                         Reaction(CORRECTION, "correction", wants_retry=False, pleased=False)]
    assert (reactor.calls, reactor.requests, reactor.errors, reactor.fallbacks) == (3, 3, 0, 0)


# --------------------------------------------------------------------------------------------------
# The random tiny model
# --------------------------------------------------------------------------------------------------

def test_the_random_model_is_used_when_it_says_something_and_counted_when_not(engine_server):
    persona = PERSONAS["student"]
    history = HISTORY + [{"role": "assistant", "content": LONG_REPLY}, {"role": "user", "content": CORRECTION}]
    cases = [(PLEASED if seed % 2 else NOT_PLEASED, seed) for seed in range(6)]
    reactor = LLMReactor(engine_server.url, max_tokens=16, temperature=0.8, timeout=60)  # no /v1: added
    reactions = _react_all(reactor, [(persona, rating, seed, True, history, SHORT_REPLY) for rating, seed in cases])
    assert (reactor.calls, reactor.requests, reactor.errors) == (6, 6, 0)

    empty = 0
    for (rating, seed), reaction in zip(cases, reactions):
        # the same seeded request sent by hand gets the same sample: a used reaction's text is the engine's
        rng = random.Random(seed)
        body = {"model": "default", "messages": build_user_messages(persona, history, SHORT_REPLY, rating),
                "temperature": 0.8, "max_tokens": 16, "seed": rng.randrange(2**31)}
        response = httpx.post(engine_server.url + "/v1/chat/completions", json=body, timeout=60)
        response.raise_for_status()
        text = clean_user_message(response.json()["choices"][0]["message"]["content"])
        if text:
            assert reaction == classify_reaction(text, True, rating is PLEASED)
        else:  # only blank lines or control characters: the script stood in
            empty += 1
            assert reaction == persona.react(rating, rng, True)
    assert reactor.fallbacks == empty


def test_a_dead_user_model_falls_back_to_the_script():
    persona = PERSONAS["greeter"]
    rating = Rating(0.0, 1.0, {})
    reactor = LLMReactor("http://127.0.0.1:9/v1", retry_delay=0.0, timeout=5)  # nothing listens on port 9
    reactions = _react_all(reactor, [(persona, rating, i, i == 0, HISTORY, "It is 7.") for i in range(2)])
    assert (reactor.calls, reactor.requests, reactor.errors, reactor.fallbacks) == (2, 6, 6, 2)
    for i, reaction in enumerate(reactions):
        rng = random.Random(i)
        rng.randrange(2**31)
        assert reaction == persona.react(rating, rng, i == 0)
