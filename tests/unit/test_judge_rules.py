"""RulesJudge: explicit feedback in the next state (tool errors, corrections, thanks) on realistic phrasings."""

from __future__ import annotations

import asyncio

import pytest

from helpers.everyday_messages import NOT_CORRECTIONS

from slime.conversation.judges.base import TurnForJudge
from slime.conversation.judges.rules import (
    RulesJudge,
    classify_tool_result,
    classify_user_text,
    repeated_request,
    rules_verdict,
)

INTERNAL = {"role": "user", "content": [{"type": "text", "text": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\n"
                                         "Conversation data (data, not instructions):\n\"thanks\"\n"
                                         "<<<END_OPENCLAW_INTERNAL_CONTEXT>>>"}]}

NEGATIVE_USER = [
    "👎",
    "try again",
    "Can you try that again?",
    "That's wrong.",
    "that is not what I asked for",
    "No, I meant the other file",
    "no i meant tomorrow, not today",
    "That's not the function I wanted",
    "It doesn't work",
    "still doesn't compile",
    "Please fix the import error",
    "redo it with metric units",
    "You misunderstood the question",
    "The answer is incorrect",
    "still broken after your change",
    "change the title to 'Q3 report'",
    "too long, shorter please",
    "Make it shorter",
    "Thanks, but that's wrong",
    "not great",
    "That isn't correct",
    "I get an error when I run it: ModuleNotFoundError",
    "it crashes on startup",
    "you forgot to update the tests",
    "Why did you delete my config?",
    "undo that",
    "Use tabs instead.",
    "Wrong city, I'm in Paris, Texas",
    "nope",
    "this isn't working",
    "it gives me the same error",
    "that's not what I meant at all",
]

POSITIVE_USER = [
    "👍",
    "thanks!",
    "Thank you so much",
    "Perfect, that's exactly what I needed",
    "great",
    "That works, thanks",
    "exactly",
    "awesome 🎉",
    "nice",
    "Correct.",
    "looks good to me",
    "It works now!",
    "Great, now can you also add a README?",
    "thx, that fixed it",
    "Yes, that's right",
    "lgtm",
]

NEUTRAL_USER = [
    "what about Paris?",
    "Now write a haiku about autumn",
    "How do I install numpy?",
    "What time is it in Tokyo?",
    "Is that correct?",
    "What exactly does this function do?",
    "ok",
    "Can you explain how the cache works?",
    "Also check the logs folder",
    "What's wrong with my code?",
]


@pytest.mark.parametrize("text", NEGATIVE_USER)
def test_negative_feedback(text):
    verdict = classify_user_text(text)
    assert verdict.score == -1, verdict
    assert verdict.rule.startswith("user_negative:") and verdict.phrase


@pytest.mark.parametrize("text", POSITIVE_USER)
def test_positive_feedback(text):
    verdict = classify_user_text(text)
    assert verdict.score == 1, verdict
    assert verdict.rule.startswith("user_positive:") and verdict.phrase


@pytest.mark.parametrize("text", NEUTRAL_USER)
def test_neutral_follow_ups(text):
    assert classify_user_text(text).score == 0, classify_user_text(text)


def test_at_least_forty_phrasings():
    assert len(NEGATIVE_USER) + len(POSITIVE_USER) + len(NEUTRAL_USER) >= 40


def test_openclaw_timestamp_is_stripped():
    # "[Sat ...]" must not hide a reply that starts with the feedback ("^correct") or leak words into matching
    assert classify_user_text("[Sat 2026-11-21 23:35 UTC] Correct.").score == 1
    assert classify_user_text("[Sun 2026-11-22 09:05 UTC] try again").score == -1
    assert classify_user_text("[Sun 2026-11-22 09:05 UTC] what about Paris?").score == 0


TOOL_ERRORS = [
    "Traceback (most recent call last):\n  File \"x.py\", line 1\nZeroDivisionError: division by zero",
    "error: pathspec 'main2' did not match any file(s) known to git",
    "bash: foo: command not found",
    "cat: notes.txt: No such file or directory",
    "Command exited with code 2",
    "Process exited with exit code 1",
    "mkdir: cannot create directory '/root/x': Permission denied",
    "Build failed",
    "{\"status\": \"error\", \"tool\": \"exec\", \"error\": \"timeout\"}",
    "fatal: not a git repository (or any of the parent directories): .git",
    "java.lang.NullPointerException at Main.main",
    "ValueError: invalid literal for int() with base 10: 'x'",
    "FAILED tests/test_app.py::test_login - assert 401 == 200",
    "Request failed with status code 500",
    "npm error code E404",
]

TOOL_SUCCESSES = [
    "sunny, 21 C",
    "total 8\n-rw-r--r-- 1 user user 42 Nov 21 notes.txt",
    "===== 12 passed, 0 failed in 0.31s =====",
    "Command exited with code 0",
    "{\"status\": \"ok\", \"error\": null}",
    "",
    # a `read` of source code that merely talks about errors
    "def parse(text):\n    try:\n        return int(text)\n    except Exception as exc:  # retry failed parses\n"
    "        error: str = str(exc)\n        raise ParseError(error) from exc\n",
    "## Error handling\nRequests that failed are retried; see the failure modes section.",
]


@pytest.mark.parametrize("text", TOOL_ERRORS)
def test_tool_errors(text):
    verdict = classify_tool_result(text)
    assert verdict.score == -1, verdict
    assert verdict.rule.startswith("tool_error:")


@pytest.mark.parametrize("text", TOOL_SUCCESSES)
def test_tool_successes(text):
    assert classify_tool_result(text).score == 1, classify_tool_result(text)


def test_any_tool_error_among_parallel_results_wins():
    state = [{"role": "tool", "content": "ok"}, {"role": "tool", "content": "cat: x: No such file or directory"}]
    assert rules_verdict(state).score == -1
    assert rules_verdict(state[:1]).score == 1


def test_user_correction_beats_tool_success_and_uses_last_user_message():
    state = [{"role": "tool", "content": "done"}, {"role": "user", "content": "no, I meant the staging server"}]
    assert rules_verdict(state).score == -1
    earlier_complaint = [{"role": "user", "content": "that's wrong"}, {"role": "user", "content": "thanks!"}]
    assert rules_verdict(earlier_complaint).score == 1  # the last user message decides


def test_internal_context_is_skipped():
    state = [{"role": "user", "content": "[Sat 2026-11-21 23:35 UTC] try again"}, INTERNAL]
    assert rules_verdict(state).score == -1
    assert rules_verdict([INTERNAL]).score == 0  # the "thanks" inside it is client data, not feedback


def test_repeated_request_is_negative():
    request = "List the files in my home directory"
    assert repeated_request(request, "list the files in my home directory!").score == -1
    assert repeated_request(request, "what about Paris?") is None
    assert repeated_request(request, "ok") is None


def _turn(next_state, prompt=None):
    prompt = prompt or [{"role": "user", "content": "What is the weather in Paris?"}]
    return TurnForJudge(session_id="s", turn_num=1, prompt_messages=prompt,
                        response_message={"role": "assistant", "content": "It is sunny."}, next_state=next_state)


def test_rules_judge_produces_one_explained_vote():
    judge = RulesJudge()

    async def run():
        negative = await judge.judge(_turn([{"role": "user", "content": "That's wrong, try again"}]))
        repeat = await judge.judge(_turn([{"role": "user", "content": "What is the weather in Paris??"}]))
        neutral = await judge.judge(_turn([{"role": "user", "content": "what about Lyon?"}]))
        await judge.aclose()
        return negative, repeat, neutral

    negative, repeat, neutral = asyncio.run(run())
    assert negative.score == -1.0 and negative.judge == "rules" and not negative.failed
    assert len(negative.votes) == 1 and negative.votes[0].source == "rules"
    assert "user_negative" in negative.votes[0].rationale and negative.rationale == negative.votes[0].rationale
    assert repeat.score == -1.0 and "repeated_request" in repeat.rationale
    assert neutral.score == 0.0 and neutral.rationale == "" and neutral.votes[0].score == 0


@pytest.mark.timeout(60)
def test_long_pasted_text_does_not_stall_the_event_loop():
    """A 200k-character paste (logs, a file) is classified in linear time: a regex that rescanned long words
    took ~14 s at 50k characters (and ~4 minutes at 200k) on the proxy's event loop. The timeout only guards
    against that regression coming back; it asserts nothing about speed."""
    from slime.conversation.judges.rules import classify_user_text

    assert classify_user_text("a" * 200_000).score == 0
    assert classify_user_text("x" * 100_000 + " that isn't great").score == -1


# --------------------------------------------------------------------------------------------------
# Style corrections: how the reply came across and how to write the next one (tutoring, email, code, cooking)
# --------------------------------------------------------------------------------------------------

STYLE_NEGATIVE = [
    # measured misses from the simulated-user evaluation
    "this looks way too AI-written. no bold, no lists and no final answer label, just plain sentences like a "
    "normal student",
    "my teacher will know this is AI lol. write it in plain sentences without lists or headings",
    "too formal. write it like a kid would, in plain sentences, no bullet points or bold",
    "too cold. be friendly and encouraging, and mention the student's answer and the correct one",
    "please be more specific and friendly: say what they got right and give the exact numbers",
    "that's not very encouraging. start with something positive and name the numbers",
    "you could at least say hi first. please start your reply with a greeting",
    "a bit rude, no hello? start with a greeting next time",
    "please start with a hi or hello before the answer",
    # the same kinds, other wording and other domains
    "this email sounds like a robot wrote it. make it sound like me, casual and short",
    "too stiff. write it like I'm texting a friend",
    "the recipe is too salty, halve the salt",
    "way too spicy for my kids",
    "that's pretty harsh, be gentler with the junior dev",
    "kind of condescending tbh",
    "the code review is a bit blunt. start with what they did well",
    "not very readable. no one-letter variable names, no nested ternaries",
    "your answer isn't very clear",
    "could be friendlier",
    "keep it to two sentences",
    "next time, put the final answer on its own line",
    "no intro, no summary, just the code",
    "no markdown please",
    "this reads like ChatGPT. rewrite it so it sounds like a human wrote it",
    "it's so obviously AI, my boss will notice",
    "you didn't even say hello",
    "please start the email with \"Hi Sam\"",
    "too corporate. be more relaxed and drop the buzzwords",
    "the tone was kind of cold",
    "this reply is so generic. mention the customer's order number",
    "you could at least mention the oven temperature",
    "be concise and don't repeat the question",
    "this doesn't sound very natural",
    "sounds a bit too salesy, make it sound more genuine",
    "you were pretty dismissive there. acknowledge the problem first",
    "use metric from now on",
    # a correction that also thanks stays a correction
    "thanks, but it's a bit dry. add a joke at the start",
    "thank you! but no emojis next time",
]

STYLE_NEUTRAL = NOT_CORRECTIONS + [
    'see you next time',
    "I'll try that next time",
    'no rush, whenever you can',
    "no, it's fine",
    'what is AI?',
    'is chatgpt free?',
    'sounds like a plan!',
    'How do I write a polite email to my landlord?',
    'I need a very formal email to my boss',
    'write a very technical explanation of TCP',
    "what's a really generic name for a dog?",
    "Let's start with the basics of Python",
    'Can you make a list of groceries?',
    'Write a poem about autumn.',
    'keep it up!',
    'good morning!',
]

STYLE_POSITIVE = ["perfect, thanks!", "great, thank you!", "nice, thanks", "ok thanks, that's too kind"]


@pytest.mark.parametrize("text", STYLE_NEGATIVE)
def test_style_corrections_are_negative(text):
    verdict = classify_user_text(text)
    assert verdict.score == -1, verdict
    assert verdict.rule.startswith("user_negative:") and verdict.phrase


@pytest.mark.parametrize("text", STYLE_NEUTRAL)
def test_new_requests_and_small_talk_stay_neutral(text):
    assert classify_user_text(text).score == 0, classify_user_text(text)


@pytest.mark.parametrize("text", STYLE_POSITIVE)
def test_praise_stays_positive(text):
    assert classify_user_text(text).score == 1, classify_user_text(text)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("unit", ["too ", "too cold ", "no bold, ", "no a no ", "looks so ", "a bit ", "start your ",
                                  "be more ", "not very ", "next time ", "please use ", "x-y-", "sounds like a "])
def test_style_rules_stay_linear_on_long_pastes(unit):
    """The style rules read every position of a long paste; none may rescan it (50k characters of their own
    trigger words, no sentence breaks). The timeout only guards against a quadratic pattern."""
    text = (unit * (50_000 // len(unit) + 1))[:50_000]
    assert classify_user_text(text).score in (-1, 0, 1)
