"""The CPU hint judge on real phrasings: corrections become instructions, praise and neutral follow-ups do
not, tool errors become a hint quoting the key error line."""

from __future__ import annotations

import asyncio

import pytest

from helpers.everyday_messages import NOT_CORRECTIONS

from slime.conversation.judges import RulesHintJudge, TurnForJudge, user_feedback_hint
from slime.conversation.judges.hint_rules import error_line, rules_hint, tool_error_hint

REQUEST = "What is the weather in Paris?"

# (user reply, expected hint): rewritten as an instruction to the assistant
HINTS = [
    # length
    ("shorter please", "Answer much more briefly, with only the essentials."),
    ("too long, one sentence", "Answer in one short sentence."),
    ("Way too long. Just give me the answer in one line", "Answer in a single line."),
    ("can you keep it under 50 words?", "Keep the answer to at most 50 words."),
    ("tl;dr?", "Answer much more briefly, with only the essentials."),
    ("ugh, wall of text. get to the point", "Answer much more briefly, with only the essentials."),
    ("too short, can you elaborate?", "Give a more detailed, complete answer."),
    ("too complicated, explain like I'm five", "Explain it more simply, without jargon."),
    # don't / stop
    ("don't use bullet points", "Do not use bullet points."),
    ("stop using bullet points", "Do not use bullet points."),
    ("Please don't use emojis.", "Do not use emojis."),
    ("no more emojis please", "Do not use emojis."),
    ("Stop apologizing.", "Do not apologize."),
    ("ok but never call me Bob", "Do not call the user Bob."),
    ("avoid passive voice", "Do not use passive voice."),
    ("I don't want the explanation, just the code", "Leave out the explanation."),
    # should have / next time
    ("you should have checked the logs first", "Check the logs first."),
    ("You should've asked before deleting the file.", "Ask before deleting the file."),
    ("you need to run the tests first", "Run the tests first."),
    ("you shouldn't have deleted the branch", "Do not delete the branch."),
    ("you should not have pushed to main", "Do not push to main."),
    ("You were supposed to use the staging database", "Use the staging database."),
    ("you could have just used grep", "Use grep."),
    ("next time, ask before running destructive commands", "Ask before running destructive commands."),
    ("did you even check the docs?", "Check the docs first."),
    ("always use the staging server", "Always use the staging server."),
    ("Thanks, you should also know that I prefer tea", "Note that the user prefers tea."),
    ("you forgot to add the tests", "Remember to add the tests."),
    ("you forgot the unit", "Include the unit."),
    ("you didn't read my message", "Read the user's message."),
    # meaning / facts
    ("no, I meant Paris, Texas", "The user meant Paris, Texas."),
    ("[Sat 2026-11-21 23:36 UTC] no I meant the other repo", "The user meant the other repo."),
    ("not Python, Rust", "The user wants Rust, not Python."),
    ("that's not what I asked, I asked for the weather in Paris tomorrow",
     "The user asked for the weather in Paris tomorrow."),
    ("it should be 42, not 24", "It should be 42, not 24."),
    ("actually, the meeting is on Tuesday", "Note that the meeting is on Tuesday."),
    # style, language, units, format, content
    ("use metric units", "Use metric units."),
    ("in celsius please", "Use degrees Celsius."),
    ("in French please", "Answer in French."),
    ("can you answer in Spanish?", "Answer in Spanish."),
    ("more formal please", "Use a more formal tone."),
    ("this is too casual", "Use a less casual tone."),
    ("be more specific", "Be more specific."),
    ("add an example", "Include an example."),
    ("can you also add some examples?", "Include some examples."),
    ("please include the source", "Include the source."),
    ("format it as a table", "Format the answer as a table."),
    # a numbered list is named with its markers (measured: the 135M teacher follows that twice as often)
    ("too messy. write it as a numbered list", "Make it cleaner and better organized. Write it as a numbered list: 1., 2., 3."),
    ("not very clear. use a numbered list", "Be clearer. Write it as a numbered list: 1., 2., 3."),
    ("use pnpm instead of npm", "Use pnpm instead of npm."),
    ("use pnpm", "Use pnpm."),
    # two corrections in one reply: both kept, in the order given
    ("thanks, but too long, and don't use bullet points",
     "Answer much more briefly, with only the essentials. Do not use bullet points."),
    ("in French please, and more formal", "Answer in French. Use a more formal tone."),
    # no rule rewrites it, but it corrects with content: the user's own words
    ("still wrong, the capital of Australia is Canberra",
     'Follow the user\'s correction: "still wrong, the capital of Australia is Canberra"'),
    ("wrong city, I'm in Paris, Texas", 'Follow the user\'s correction: "wrong city, I\'m in Paris, Texas"'),
]

# praise, neutral follow-ups and content-free complaints: no hint
NOT_HINTS = [
    "thanks!",
    "perfect, thank you",
    "great, now do the same for Berlin",
    "what about tomorrow?",
    "ok",
    "sounds good",
    "👍",
    "Can you also book a table for two at 7?",
    "I don't know, what do you think?",
    "don't worry about it, thanks",
    "no problem",
    "lol nice",
    "that's wrong",
    "try again",
    "no",
    "nope, still not right",
    "[Sat 2026-11-21 23:36 UTC] awesome, that works",
    "Tell me a joke about cats",
    "I no longer need this, thanks",
    "I always forget how git rebase works",
    "Translate this to German: good morning",
    "Don't forget to buy milk tomorrow, add it to my reminders",
    "What is the weather in Paris?",  # a repeat of the request says "missed", but nothing new
]


@pytest.mark.parametrize("reply, expected", HINTS)
def test_corrections_become_instructions(reply, expected):
    match, reason = user_feedback_hint(reply, REQUEST)
    assert match is not None, reason
    assert match.hint == expected


@pytest.mark.parametrize("reply, expected", [
    ("put it in bullet points", "Format the answer as bullet points."),  # once a crash: no count before the unit
    ("in 3 bullet points please", "Keep the answer to at most 3 bullet points."),
])
def test_bullet_points_with_and_without_a_count(reply, expected):
    match, reason = user_feedback_hint(reply, REQUEST)
    assert match is not None and match.hint == expected, (match, reason)


def test_how_the_reply_opens_is_said_as_a_rule_about_the_reply():
    """ "start with X" becomes 'Your reply must start with X' and bare greeting words are quoted, because a small
    teacher follows that far more often (hint_rules._reply_rule's comment has the measurement); what is not about
    the reply as a whole is kept as said."""
    cases = {
        "always start with a hi": 'Your reply must start with "Hi".',
        "please start your reply with a short greeting": 'Your reply must start with a short greeting such as "Hello!".',
        "lead with the answer please": "Your reply must start with the answer.",
        "end with a question to check i understood": "Your reply must end with a question to check i understood.",
        "start each paragraph with a heading": "Start each paragraph with a heading.",
        "start by checking the logs first": "Start by checking the logs first.",
        'please start with "well hi there"': 'Your reply must start with "well hi there".',
        "start with the history of hi-fi audio": "Your reply must start with the history of hi-fi audio.",
        "write the email without exclamation marks, and sign off with my name":
            "Write the email without exclamation marks. Sign off with the user's name.",
    }
    for reply, expected in cases.items():
        match, reason = user_feedback_hint(reply, REQUEST)
        assert match is not None and match.hint == expected, (reply, match, reason)


@pytest.mark.parametrize("reply, expected", [
    # a quotation is read whole: its "!" or "?" ends no phrase
    ('sounds a bit curt. next time start with "Sure!" and then answer',
     'Be less curt. Your reply must start with "Sure!" and then answer.'),
    # quoted words for the reply, as a rule about the reply (the opening rule's form; measured for "therefore")
    ('you could at least say "sure!" first', 'Your reply must say "sure!" first.'),
    ('too abrupt. say "therefore" before the final answer',
     'Be less abrupt. Your reply must say "therefore" before the final answer.'),
    ('no, use the word "therefore" before the answer', 'Your reply must use the word "therefore" before the answer.'),
    ("no. use pytest for the tests", "Use pytest for the tests."),  # a tool, not the reply's wording
    ('you should have asked "are you sure?" before deleting it', 'Ask "are you sure?" before deleting it.'),
    ('don\'t write "Final answer:" or "Answer!" at the end', 'Do not write "Final answer:" or "Answer!" at the end.'),
    # an unclosed quotation still ends at the sentence's end
    ('next time start with "Sure! and then answer', 'Your reply must start with "Sure".'),
])
def test_quoted_punctuation_does_not_cut_the_instruction(reply, expected):
    match, reason = user_feedback_hint(reply, REQUEST)
    assert match is not None, reason
    assert match.hint == expected


@pytest.mark.parametrize("reply", NOT_HINTS)
def test_praise_and_neutral_replies_give_no_hint(reply):
    match, reason = user_feedback_hint(reply, REQUEST)
    assert match is None, match
    assert reason


def test_enough_phrasings():
    assert len(HINTS) + len(NOT_HINTS) >= 40


def test_repeated_request_with_new_words_is_kept():
    match, _ = user_feedback_hint("what is the weather in Paris today, in Paris France", REQUEST)
    assert match is not None and match.rule == "repeated_request"
    assert match.hint.startswith("The previous answer missed the request")


# --------------------------------------------------------------------------------------------------
# tool errors
# --------------------------------------------------------------------------------------------------

TRACEBACK = """Traceback (most recent call last):
  File "/tmp/run.py", line 1, in <module>
    import foo
ModuleNotFoundError: No module named 'foo'
"""


@pytest.mark.parametrize("output, line", [
    (TRACEBACK, "ModuleNotFoundError: No module named 'foo'"),
    ("bash: rg: command not found\n", "bash: rg: command not found"),
    ("npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/nope\n", "npm error code E404"),
    ('{"status": "error", "error": "city not found"}', '"status": "error"'),
    ("cat: /etc/shadow: Permission denied", "cat: /etc/shadow: Permission denied"),
    ("Process exited with code 2\nstdout: ...", "Process exited with code 2"),
    ("fatal: not a git repository (or any of the parent directories): .git",
     "fatal: not a git repository (or any of the parent directories): .git"),
])
def test_error_line(output, line):
    assert line in error_line(output)


@pytest.mark.parametrize("output", ["sunny, 21 C", "5 passed, 0 failed in 0.3s", "def f():\n    raise_error = 1\n", ""])
def test_successful_tool_output_is_no_hint(output):
    assert error_line(output) is None
    assert tool_error_hint([{"role": "tool", "content": output}]) is None


def call(name, call_id="c1"):
    return {"role": "assistant", "content": "",
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]}


def test_tool_error_hint_names_the_failing_call():
    response = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "function": {"name": "read", "arguments": "{}"}},
        {"id": "b", "function": {"name": "exec", "arguments": '{"cmd": "python run.py"}'}}]}
    state = [{"role": "tool", "tool_call_id": "a", "content": "print('hi')"},
             {"role": "tool", "tool_call_id": "b", "content": TRACEBACK}]
    match = tool_error_hint(state, response)
    assert match.hint.startswith("The previous `exec` call failed with: ModuleNotFoundError: No module named 'foo'.")
    assert tool_error_hint([{"role": "tool", "content": TRACEBACK}]).hint.startswith(
        "The previous command failed with: ModuleNotFoundError: No module named 'foo'.")


def test_user_pasting_a_traceback():
    match, _ = user_feedback_hint("I get this error:\n" + TRACEBACK, REQUEST)
    assert match.hint == "Running it failed with: ModuleNotFoundError: No module named 'foo'."


def test_user_correction_and_tool_error_together():
    state = [{"role": "tool", "tool_call_id": "c1", "content": "bash: rg: command not found"},
             {"role": "user", "content": "use grep"}]
    match, _ = rules_hint(state, REQUEST, call("exec"))
    assert match.hint == "Use grep. The previous `exec` call failed with: bash: rg: command not found. " \
                         "Avoid or fix this cause instead of repeating it."
    match, reason = rules_hint([{"role": "tool", "content": "sunny"}, {"role": "user", "content": "thanks"}], REQUEST)
    assert match is None and "positive" in reason


# --------------------------------------------------------------------------------------------------
# the judge
# --------------------------------------------------------------------------------------------------

INTERNAL = {"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nshorter please, don't use bullet points"}


def judge(next_state, prompt=None, response=None):
    turn = TurnForJudge("s", 1, prompt or [{"role": "user", "content": REQUEST}],
                        response or {"role": "assistant", "content": "It is sunny."}, next_state)
    judge = RulesHintJudge()

    async def go():
        try:
            return await judge.hint(turn)
        finally:
            await judge.aclose()

    return asyncio.run(go()), judge.stats


def test_rules_hint_judge_result():
    result, stats = judge([{"role": "user", "content": "[Sat 2026-11-21 23:35 UTC] in French please"}, INTERNAL])
    assert result.accepted and result.hint == "Answer in French." and result.judge == "rules" and not result.failed
    assert [v.score for v in result.votes] == [1] and result.votes[0].source == "rules"
    assert result.votes[0].rationale.startswith("language:") and result.extras["rule"] == "language"
    assert stats == {"calls": 1, "accepted": 1}


def test_internal_context_is_never_feedback():
    result, stats = judge([INTERNAL])
    assert not result.accepted and result.hint == "" and result.votes[0].score == -1
    assert "no user reply" in result.extras["reason"] and stats == {"calls": 1, "accepted": 0}


def test_tool_error_through_the_judge():
    result, _ = judge([{"role": "tool", "tool_call_id": "c1", "content": TRACEBACK}], response=call("exec"))
    assert result.accepted and "ModuleNotFoundError: No module named 'foo'" in result.hint
    assert result.extras["rule"] == "tool_error"


def test_long_replies_stay_fast():
    import time

    started = time.monotonic()
    assert user_feedback_hint("a" * 50000, REQUEST)[0] is None
    long_paste = "here is the log:\n" + "INFO step ok\n" * 3000 + TRACEBACK  # the traceback far past the scan limit
    match, _ = user_feedback_hint(long_paste, REQUEST)
    assert match.hint == "Running it failed with: ModuleNotFoundError: No module named 'foo'."
    assert time.monotonic() - started < 2.0


# --------------------------------------------------------------------------------------------------
# style corrections: how the reply came across and how to write the next one
# --------------------------------------------------------------------------------------------------

# (user reply, expected hint): every distinct instruction kept (up to MAX_INSTRUCTIONS), explicit instructions
# before bare judgements ("too cold"), the user's first person from the assistant's view
STYLE_HINTS = [
    # measured misses from the simulated-user evaluation
    ("this looks way too AI-written. no bold, no lists and no final answer label, just plain sentences like a "
     "normal student",
     "Make it read less like AI-written text. Do not use bold, lists or final answer label; use only plain sentences "
     "like a normal student."),
    ("my teacher will know this is AI lol. write it in plain sentences without lists or headings",
     "Make it read less like AI-written text. Write it in plain sentences without lists or headings."),
    ("too formal. write it like a kid would, in plain sentences, no bullet points or bold",
     "Use a less formal tone. Write it like a kid would, in plain sentences, no bullet points or bold."),
    ("too cold. be friendly and encouraging, and mention the student's answer and the correct one",
     "Be friendly and encouraging. Mention the student's answer and the correct one."),
    ("please be more specific and friendly: say what they got right and give the exact numbers",
     "Be more specific and friendly. Say what they got right and give the exact numbers."),
    ("that's not very encouraging. start with something positive and name the numbers",
     "Be more encouraging. Your reply must start with something positive and name the numbers."),
    ("you could at least say hi first. please start your reply with a greeting",
     'Say hi first. Your reply must start with a greeting such as "Hello!".'),
    ("a bit rude, no hello? start with a greeting next time",
     'Be more polite. Your reply must start with a greeting such as "Hello!".'),
    ("please start with a hi or hello before the answer", 'Your reply must start with "Hi" or "Hello" before the answer.'),
    # judgements alone
    ("too cold", "Use a warmer tone."),
    ("that's not very encouraging", "Be more encouraging."),
    ("this looks way too AI-written", "Make it read less like AI-written text."),
    ("the recipe is too salty, halve the salt", "Make it less salty."),
    ("kind of condescending tbh", "Do not be condescending."),
    ("could be friendlier", "Be friendlier."),
    ("too many emojis", "Use fewer emojis."),
    ("you didn't even say hello", 'Your reply must start with a greeting such as "Hello!".'),
    ("no markdown please", "Do not use markdown."),
    ("nope, no bullet points", "Do not use bullet points."),
    ("you could at least have said hi", "Say hi."),
    # judgement + instruction, other wording and other domains (email, code, cooking, support)
    ("this email sounds like a robot wrote it. make it sound like me, casual and short",
     "Make it sound less robotic and more natural. Make it sound like the user, casual and short."),
    ("too stiff. write it like I'm texting a friend",
     "Make it sound more natural. Write it like the user is texting a friend."),
    ("that's pretty harsh, be gentler with the junior dev", "Be gentler with the junior dev."),
    ("the code review is a bit blunt. start with what they did well",
     "Be gentler and less blunt. Your reply must start with what they did well."),
    ("not very readable. no one-letter variable names, no nested ternaries",
     "Make it more readable. Do not use one-letter variable names or nested ternaries."),
    ("write the email without exclamation marks, and sign off with my name",
     "Write the email without exclamation marks. Sign off with the user's name."),
    ("no intro, no summary, just the code", "Do not use intro or summary; use only the code."),
    ("no type hints, no docstrings, just the function", "Do not use type hints or docstrings; use only the function."),
    ("this reads like ChatGPT. rewrite it so it sounds like a human wrote it",
     "Make it read less like AI-written text. Rewrite it so it sounds like a human wrote it."),
    ("that was kind of cold. say sorry for the delay first", "Use a warmer tone. Say sorry for the delay first."),
    ("you could at least mention the oven temperature", "Mention the oven temperature."),
    ("thanks, but it's a bit dry. add a joke at the start", "Make it more engaging. Add a joke at the start."),
    ("the comments are too preachy, just say what to fix", "Make it less preachy. Say what to fix."),
    ("not friendly enough, greet the customer by name", "Be friendlier. Greet the customer by name."),
    ("that's not very professional, remove the jokes", "Be more professional. Remove the jokes."),
    ("sounds a bit too salesy, make it sound more genuine", "Make it less salesy. Make it sound more genuine."),
    ("kinda robotic tbh, write it like a real person would",
     "Make it sound less robotic and more natural. Write it like a real person would."),
    ("the function names are too cryptic. use descriptive names", "Make it less cryptic. Use descriptive names."),
    ("this reply is so generic. mention the customer's order number",
     "Be more specific. Mention the customer's order number."),
    ("you were pretty dismissive there. acknowledge the problem first",
     "Do not be dismissive. Acknowledge the problem first."),
    ('be a bit warmer and sign off with "Best, Ana"', 'Be a bit warmer and sign off with "Best, Ana".'),
    ("keep it to two sentences and no emojis", "Keep it to two sentences and no emojis."),
    # "no X?" misses X: nothing is forbidden, the instruction after it is the hint
    ('hmm, no summary? end with "In summary" and the answer please',
     'Your reply must end with "In summary" and the answer.'),
    ("too corporate. be more relaxed and drop the buzzwords",
     "Make it less corporate. Be more relaxed and drop the buzzwords."),
]

# no correction: new requests, small talk, praise; "tell me ..." / "give me ..." are requests, not instructions
STYLE_NOT_HINTS = NOT_CORRECTIONS + [
    'perfect, thanks!',
    'great, thank you!',
    'nice, thanks',
    'I need a very formal email to my boss',
    'can you give me a recipe for banana bread?',
    'write an email to my landlord about the broken heater',
    "Let's start with the basics of Python",
    'keep it up!',
]


@pytest.mark.parametrize("reply, expected", STYLE_HINTS)
def test_style_corrections_become_instructions(reply, expected):
    match, reason = user_feedback_hint(reply, REQUEST)
    assert match is not None, reason
    assert match.hint == expected


@pytest.mark.parametrize("reply", STYLE_NOT_HINTS)
def test_requests_small_talk_and_praise_give_no_style_hint(reply):
    match, reason = user_feedback_hint(reply, REQUEST)
    assert match is None, match
    assert reason


def test_explicit_instructions_outrank_a_judgement_but_stay_in_order():
    # three corrections, room for two: the bare judgement ("too cold") gives way
    match, _ = user_feedback_hint("too cold. be friendly and encouraging, and mention the student's answer", REQUEST)
    assert match.hint == "Be friendly and encouraging. Mention the student's answer."
    assert match.rule == "be_more+imperative"


def test_style_rules_stay_fast_on_long_replies():
    import time

    started = time.monotonic()
    for unit in ["too ", "no bold, ", "no a no ", "looks so ", "a bit too ", "be more ", "start your ", "say ", "x-y-"]:
        user_feedback_hint((unit * (50_000 // len(unit) + 1))[:50_000], REQUEST)
    assert time.monotonic() - started < 5.0
