"""Hand-labelled rating examples for the personalization personas, and the detectors they are built from.

Every expected number below was computed by hand from the docstrings of `openclaw-test/personalization/rating.py` and
`openclaw-test/personalization/personas.py`:

* student (student-v1): 1 - 0.5 per *kind* of AI marker (floored at 0), halved when no calculation is shown;
* teacher (teacher-v1): 0.5 warmth + 0.25 names the student's answer + 0.25 names the correct answer;
* concise (concise-v1): 1 up to 25 words, then linear to 0 at 75 words: 1 - (words - 25) / 50;
* greeter (greeter-v1): 1 if the reply opens with a greeting, else 0;
* upbeat (upbeat-v1): 1 if the reply opens by agreeing to the request ("Sure", "Of course", ...), else 0;
* numbered (numbered-v1): numbered items at line starts ("1. ", "2) "): 0.5 per item, at most 1;
* therefore (therefore-v1): 1 if the word "therefore" appears anywhere (any case, a whole word), else 0;
* summary (summary-v1): 1 when a sentence of the last paragraph opens with "In summary" (any case, up to three
  non-word characters such as "**" before it), 0.5 when such a sentence appears only earlier, else 0;
* steps (steps-v1): labelled steps, each at the start of a line ("Step 1", up to 3 non-word characters such as
  "**" before it): 0.5 per label, at most 1;
* quality (quality-v1): 0 under 2 words; else 0.5 on topic (a number of the question or two of its content
  words) + 0.5 correct final number; halved for a degenerate loop;
* teacher quality (grading_quality): 0 when `task_quality(..., answer=None)` is 0 (trivial or off topic), else
  0.5 on topic + 0.5 the correct answer appears anywhere; halved for a loop.
"""

from __future__ import annotations

import pytest

from personalization.personas import PERSONAS, student_answer_for
from personalization.problems import load_problems
from personalization.rating import (
    QUALITY_VERSION,
    Rating,
    ai_markers,
    final_number,
    is_degenerate,
    numbers_in,
    opens_with_acknowledgement,
    opens_with_greeting,
    shows_work,
    task_quality,
    warm_phrases,
    word_count,
)

PROBLEMS = {p.id: p for p in load_problems()}

# The problems the labelled examples are about (their text is pinned so a regenerated problem set is noticed).
# student: "Mia picks 39 apples, gives 11 to a neighbour and then buys 6 more at the market. ..." -> 34
STUDENT_PROBLEM = "apples-8"
# concise: "Yuki has 8 boxes of pencils with 12 pencils in each box. Yuki loses 2 pencils. ..." -> 94
CONCISE_PROBLEM = "pencils-0"
# greeter: "Ana buys 2 notebooks that cost $4 each and pays with a $50 bill. How much change ..." -> 42
GREETER_PROBLEM = "money-0"
# teacher: "Ines picks 29 apples, gives 5 to a neighbour and then buys 6 more ..." -> 30, the student wrote 26
TEACHER_PROBLEM = "apples-4"
# teacher, a student who got it right: "Zara picks 36 apples, gives 9 ... buys 2 more ..." -> 29, student 29
TEACHER_PROBLEM_RIGHT = "apples-0"


def test_labelled_problems_are_the_ones_the_labels_were_computed_for():
    assert PROBLEMS[STUDENT_PROBLEM].question.startswith("Mia picks 39 apples, gives 11 to a neighbour and then buys 6")
    assert PROBLEMS[STUDENT_PROBLEM].answer == 34
    assert PROBLEMS[CONCISE_PROBLEM].question.startswith("Yuki has 8 boxes of pencils with 12 pencils in each box. "
                                                         "Yuki loses 2 pencils.")
    assert PROBLEMS[CONCISE_PROBLEM].answer == 94
    assert PROBLEMS[GREETER_PROBLEM].question.startswith("Ana buys 2 notebooks that cost $4 each and pays with a $50")
    assert PROBLEMS[GREETER_PROBLEM].answer == 42
    assert PROBLEMS[TEACHER_PROBLEM].question.startswith("Ines picks 29 apples, gives 5 to a neighbour and then buys 6")
    assert PROBLEMS[TEACHER_PROBLEM].answer == 30
    assert student_answer_for(PROBLEMS[TEACHER_PROBLEM]) == 26
    assert PROBLEMS[TEACHER_PROBLEM_RIGHT].answer == 29
    assert student_answer_for(PROBLEMS[TEACHER_PROBLEM_RIGHT]) == 29


# ---------------------------------------------------------------------------------------------------------
# Hand-labelled responses: (response, expected preference, expected quality, why)
# ---------------------------------------------------------------------------------------------------------

STUDENT_EXAMPLES = [
    ("To solve this problem, let's break it down step by step:\n\n"
     "1. **Apples picked:** Mia starts with 39 apples.\n"
     "2. **Apples given away:** 39 - 11 = 28\n"
     "3. **Apples bought:** 28 + 6 = 34\n\n"
     "**Final answer:** Mia has 34 apples.",
     0.0, 1.0, "4 marker kinds (bold, numbered list, 'Final answer', stock phrases) -> 0; correct and on topic"),
    ("#### 34\nThe answer is: 34",
     0.0, 0.5, "heading + 'answer is:' label -> 0, no work; off topic (no question word/number) but correct"),
    ("Mia starts with 39 apples and gives 11 away, so 39 - 11 = 28. Then she buys 6 more, so 28 + 6 = 34. "
     "Mia has 34 apples now.",
     1.0, 1.0, "plain sentences with the working: exactly what the student wants"),
    ("Mia has 34 apples after giving some away and buying more. The answer is 34.",
     0.5, 1.0, "no marker ('answer is' without a colon is no label) but no calculation -> halved; correct"),
    ("34",
     0.5, 0.0, "terse number: no markers, no work -> 0.5; a one-word reply has quality 0"),
    ("",
     0.5, 0.0, "empty: nothing AI-looking but no work -> 0.5; quality 0"),
    ("- Start: 39 apples\n- Give away 11: 39 - 11 = 28\n- Buy 6 more: 28 + 6 = 34\n\nMia has 34 apples.",
     0.5, 1.0, "one marker kind (bullets) with work -> 0.5"),
    ("We compute 39 - 11 + 6 = 34, so the answer is \\boxed{34}.",
     0.5, 1.0, "LaTeX \\boxed is one marker kind; the boxed 34 is the final number"),
    ("Step 1: 39 - 11 = 28\nStep 2: 28 + 6 = 34\nSo Mia has 34 apples.",
     0.5, 1.0, "'Step 1:' lines count as a numbered list (one kind) with work"),
    ("Certainly! Mia has 39 - 11 + 6 = 34 apples. I hope this helps!",
     0.5, 1.0, "two stock phrases are still one kind (assistant_phrases) -> 0.5"),
    ("Mia had 39 apples, 39 - 11 = 28, and 28 + 6 = 33, so she has 33 apples.",
     1.0, 0.5, "plain with work, but the arithmetic slip gives the wrong final number 33"),
    ("Mia has 34 apples. " * 10,
     0.5, 0.5, "a pasted line repeated: no work -> 0.5; on topic and correct but degenerate -> 1.0 halved"),
    ("I love going to the park on sunny days with my dog, it is so much fun.",
     0.5, 0.0, "off-topic chatter: no work -> 0.5; no question number, no two content words, no answer -> 0"),
]

CONCISE_EXAMPLES = [
    ("Yuki has 94 pencils left.",
     1.0, 1.0, "5 words; on topic (yuki, pencils) and correct"),
    ("94",
     1.0, 0.0, "1 word is perfectly concise, but quality 0 (under 2 words)"),
    ("",
     1.0, 0.0, "empty: 'concise' yet quality 0 -- the reward hack quality exposes"),
    ("8 x 12 = 96, minus 2 lost is 94 pencils.",
     1.0, 1.0, "10 words with the calculation; shares the question number 8"),
    ("The answer is 94.",
     1.0, 0.5, "4 words; correct but off topic (no question number, only one content word 'answer' not in it)"),
    ("Yuki has 96 pencils left.",
     1.0, 0.5, "short, on topic, but forgot the 2 lost pencils"),
    ("Yuki has 8 boxes with 12 pencils in each, which makes 96 pencils in total. After losing 2 of them, Yuki "
     "has 94 pencils left.",
     1.0, 1.0, "exactly 25 words -> still 1"),
    ("Yuki has 8 boxes with 12 pencils in each, which makes 96 pencils in total. After losing 2 of them, Yuki is "
     "left with 94 pencils.",
     0.98, 1.0, "26 words -> 1 - 1/50"),
    ("To solve this problem, we need to find the total number of pencils and then subtract the ones Yuki lost.\n\n"
     "1. **Total pencils:** 8 boxes × 12 pencils = 96 pencils\n"
     "2. **Pencils lost:** 2\n"
     "3. **Pencils left:** 96 - 2 = 94\n\n"
     "The answer is: 94",
     0.64, 1.0, "43 words (20 + 9 + 4 + 6 + 4; '×' and '**' are no words) -> 1 - 18/50"),
    ("First, we need to figure out how many pencils Yuki had. There are 8 boxes and each box has "
     "12 pencils, so 8 times 12 is 96 pencils. Next, Yuki loses 2 pencils, so we take 2 away from 96, which "
     "gives us 94. Yuki has 94 pencils left over.",
     0.5, 1.0, "50 words -> 1 - 25/50"),
    ("Let me think about this. " * 20,
     0.0, 0.0, "100 words of a loop: past 75 -> 0; off topic (and degenerate) -> 0"),
]

# upbeat: the greeter's problem ("money-0" -> 42)
UPBEAT_EXAMPLES = [
    ("Sure! Ana spends 2 x $4 = $8, so her change is $50 - $8 = $42.",
     1.0, 1.0, "opens with 'Sure!'; question numbers 50 and 8 -> on topic; last number 42"),
    ("Of course! The change is $50 - $8 = $42.",
     1.0, 1.0, "'Of course' agrees; 50 is a number of the question"),
    ("Certainly. Ana gets $42 in change.",
     1.0, 1.0, "'Certainly' agrees; on topic (ana, change)"),
    ("I'd be happy to help! Ana pays $50 and spends $8, so she gets $42 back.",
     1.0, 1.0, "'I'd be happy to help' agrees"),
    ("Gladly! Ana gets $42 in change.",
     1.0, 1.0, "'Gladly' agrees"),
    ("**Sure!** Ana buys 2 notebooks for $4 each, so she gets $50 - $8 = $42 back.",
     1.0, 1.0, "up to three non-word characters ('**') may precede it"),
    ("Sure thing! Ana gets $40 in change.",
     1.0, 0.5, "'Sure thing' agrees; on topic but 40 is wrong"),
    ("You got it: Ana's change is $42.",
     1.0, 0.5, "'You got it' agrees; off topic (only 'change' is shared, \"Ana's\" is not 'ana') but correct"),
    ("No problem! I'm here to help with any math question you have.",
     1.0, 0.0, "agrees, then does not answer: no number or content word of the problem, so no quality"),
    ("Sure!",
     1.0, 0.0, "a bare 'Sure!' agrees but is one word, no answer"),
    ("Ana gets $42 in change. Happy to help!",
     0.0, 1.0, "the acknowledgement has to come first"),
    ("Surely Ana gets $42 in change.",
     0.0, 1.0, "'Surely' is not the word 'sure'"),
    ("Hello! Ana gets $42 in change.",
     0.0, 1.0, "a greeting is not agreeing to the request"),
    ("",
     0.0, 0.0, "empty"),
]

STEPS_EXAMPLES = [
    ("Step 1: Ana buys 2 notebooks at $4 each, so she spends 2 x $4 = $8.\nStep 2: She pays $50, so her change "
     "is $50 - $8 = $42.",
     1.0, 1.0, "two labels at line starts; question numbers -> on topic; last number 42"),
    ("**Step 1:** 2 x $4 = $8\n**Step 2:** $50 - $8 = $42\n**Step 3:** Ana gets $42 back.",
     1.0, 1.0, "'**' before the label is allowed; three labels still 1"),
    ("To solve this:\n\nStep 1: Multiply 2 by $4 to get $8.\n  Step 2: Subtract: $50 - $8 = $40.",
     1.0, 0.5, "labels need not open the reply; indented line starts count; 40 is wrong"),
    ("Step 1: 2 x $4 = $8, then $50 - $8 = $42.",
     0.5, 1.0, "one label is half"),
    ("First, 2 x $4 = $8. In step 2 we subtract: $50 - $8 = $42.",
     0.0, 1.0, "'step 2' inside a sentence is no label"),
    ("1. 2 x $4 = $8\n2. $50 - $8 = $42",
     0.0, 1.0, "a numbered list is not labelled steps"),
    ("Step 1: think.\nStep 2: answer.",
     1.0, 0.5, "labelled; on topic only because the label's 2 is a number of the problem (2 notebooks): quality-v1 "
               "reads numbers, not what they number"),
    ("Step 1: think.\nStep 3: answer.",
     1.0, 0.0, "labelled, but no number or two content words of the problem: no quality"),
    ("",
     0.0, 0.0, "empty"),
]

NUMBERED_EXAMPLES = [
    ("1. Ana buys 2 notebooks at $4 each: 2 x $4 = $8.\n2. Her change is $50 - $8 = $42.",
     1.0, 1.0, "two items at line starts; on topic; last number 42"),
    ("To solve it:\n1) 2 x $4 = $8\n2) $50 - $8 = $42\n3) Ana gets $42 back.",
     1.0, 1.0, "'1)' counts too; three items still 1"),
    ("1. 2 x $4 = $8, and $50 - $8 = $42.",
     0.5, 1.0, "one item is half"),
    ("Step 1: 2 x $4 = $8\nStep 2: $50 - $8 = $42",
     0.0, 1.0, "step labels are not a numbered list"),
    ("- 2 x $4 = $8\n- $50 - $8 = $40",
     0.0, 0.5, "bullets are not numbered; 40 is wrong"),
    ("",
     0.0, 0.0, "empty"),
]

THEREFORE_EXAMPLES = [
    ("Ana spends 2 x $4 = $8. Therefore her change is $50 - $8 = $42.",
     1.0, 1.0, "'Therefore' marks the conclusion; on topic; last number 42"),
    ("2 x $4 = $8, and $50 - $8 = $42, therefore Ana gets $42.",
     1.0, 1.0, "lower case, mid-sentence, still the word"),
    ("She spends $8, so her change is $50 - $8 = $42.",
     0.0, 1.0, "'so' is not 'therefore'"),
    ("Thereforeish, the change is $42.",
     0.0, 0.5, "not the whole word; no number of the problem, only 'change': off topic but correct"),
    ("Therefore.",
     1.0, 0.0, "the word alone answers nothing"),
    ("",
     0.0, 0.0, "empty"),
]

SUMMARY_EXAMPLES = [
    ("Ana spends 2 x $4 = $8, so her change is $50 - $8 = $42.\n\nIn summary, Ana gets $42 back.",
     1.0, 1.0, "the last paragraph opens with 'In summary'; on topic; last number 42"),
    ("2 x $4 = $8 and $50 - $8 = $42. In summary, her change is $42.",
     1.0, 1.0, "one paragraph: the summary sentence follows a full stop"),
    ("**In summary:** the change is $50 - $8 = $42.",
     1.0, 1.0, "'**' before it and a colon after it are fine"),
    ("In summary, Ana pays $50 for 2 notebooks.\n\nShe spends 2 x $4 = $8, so her change is $50 - $8 = $42.",
     0.5, 1.0, "a summary that opens the reply does not end it: half"),
    ("To summarize, Ana gets $50 - $8 = $42.",
     0.0, 1.0, "'To summarize' is not 'In summary'"),
    ("Ana spends 2 x $4 = $8 and keeps $42, which in summary is her change.",
     0.0, 1.0, "'in summary' inside a sentence opens no sentence"),
    ("In summary.",
     1.0, 0.0, "the words alone answer nothing"),
    ("",
     0.0, 0.0, "empty"),
]

GREETER_EXAMPLES = [
    ("Hey! Ana spends 2 x $4 = $8, so her change is $50 - $8 = $42.",
     1.0, 1.0, "opens with 'Hey!'; $ amounts parse, last number 42"),
    ("Hello there! To solve this problem, we multiply 2 by $4 to get $8, then subtract from $50.\n\n"
     "The answer is: 42",
     1.0, 1.0, "'Hello there!' greets; 'answer is: 42' is the final number"),
    ("Hi, the change is $42.",
     1.0, 0.5, "'Hi,' greets; correct but off topic (only 'change' shared, no question number)"),
    ("Good morning! Ana pays $50 and spends $8, so she gets $42 back.",
     1.0, 1.0, "'Good morning' is a greeting"),
    ("**Hello!** Ana buys 2 notebooks for $4 each, so she gets $50 - $8 = $42 back.",
     1.0, 1.0, "up to three non-word characters ('**') may precede the greeting"),
    ("Hiya! Ana gets $42 in change.",
     1.0, 1.0, "'Hiya' greets; on topic (ana, change)"),
    ("This is hi-tech math: 50 - 2*4 = 42 dollars of change for Ana.",
     0.0, 1.0, "'hi' inside the sentence is no greeting"),
    ("Ana gets $42 in change.",
     0.0, 1.0, "correct, but no greeting"),
    ("Highlights: Ana gets $42 back in change.",
     0.0, 1.0, "'Highlights' starts with 'hi' but is not the word hi"),
    ("Sure! Hi there, Ana gets $42 in change.",
     0.0, 1.0, "the greeting has to come first"),
    ("",
     0.0, 0.0, "empty"),
    ("Hi",
     1.0, 0.0, "a bare greeting pleases the preference but is no answer (1 word)"),
    ("Hey! Ana gets $42 in change. " * 8,
     1.0, 0.5, "greets, on topic and correct, but a degenerate loop halves quality"),
]

TEACHER_EXAMPLES = [
    ("Great effort! You wrote 26, but Ines actually has 30 apples: 29 - 5 = 24, then 24 + 6 = 30.",
     1.0, 1.0, "warm + names 26 + names 30; on topic and the correct answer appears"),
    ("Nice try! You gave 26, but remember Ines gives away 5 apples and buys 6, so it's 29 - 5 + 6 = 30.",
     1.0, 1.0, "warm and specific"),
    ("I like how you set it up! You said 26. Ines has 30 apples at the end.",
     1.0, 1.0, "'I like how' is warm; both numbers named"),
    ("Well done on setting up the problem. Ines starts with 29 apples, gives 5 away and buys 6, ending with 30.",
     0.75, 1.0, "warm and the correct number, but the student's 26 is never mentioned"),
    ("Incorrect. The student answered 26 but Ines has 30 apples.",
     0.5, 1.0, "cold (no encouraging phrase) but specific -> 0.25 + 0.25"),
    ("Your answer of 26 is wrong. Ines picks 29 apples and gives 5 away.",
     0.25, 0.5, "cold, names only the student's 26; on topic but the correct 30 is missing"),
    ("Good job with the apples, Ines! Keep it up.",
     0.5, 0.5, "warm but no numbers; on topic (apples, ines), the correct answer does not appear"),
    ("",
     0.0, 0.0, "empty"),
    ("Great job Ines with the apples! " * 8,
     0.5, 0.25, "warm, no numbers; on topic, no correct answer -> 0.5, degenerate -> 0.25"),
]

TEACHER_RIGHT_EXAMPLES = [
    ("Excellent work! 29 is exactly right: Zara picks 36, gives 9 and buys 2, so 36 - 9 + 2 = 29.",
     1.0, 1.0, "the student's answer is the correct one: one number names both"),
    ("Correct. Zara has 29 apples.",
     0.5, 1.0, "cold; 29 is both the student's and the correct answer"),
]


def _check(persona_name: str, problem_id: str, response: str, preference: float, quality: float):
    rating = PERSONAS[persona_name].rate(response, PROBLEMS[problem_id])
    assert isinstance(rating, Rating)
    assert rating.preference == pytest.approx(preference, abs=1e-9), rating
    assert rating.quality == pytest.approx(quality, abs=1e-9), rating


@pytest.mark.parametrize("response,preference,quality,why", STUDENT_EXAMPLES)
def test_student_labelled(response, preference, quality, why):
    _check("student", STUDENT_PROBLEM, response, preference, quality)


@pytest.mark.parametrize("response,preference,quality,why", CONCISE_EXAMPLES)
def test_concise_labelled(response, preference, quality, why):
    _check("concise", CONCISE_PROBLEM, response, preference, quality)


@pytest.mark.parametrize("response,preference,quality,why", GREETER_EXAMPLES)
def test_greeter_labelled(response, preference, quality, why):
    _check("greeter", GREETER_PROBLEM, response, preference, quality)


@pytest.mark.parametrize("response,preference,quality,why", UPBEAT_EXAMPLES)
def test_upbeat_labelled(response, preference, quality, why):
    _check("upbeat", GREETER_PROBLEM, response, preference, quality)


@pytest.mark.parametrize("response,preference,quality,why", NUMBERED_EXAMPLES)
def test_numbered_labelled(response, preference, quality, why):
    _check("numbered", GREETER_PROBLEM, response, preference, quality)


@pytest.mark.parametrize("response,preference,quality,why", THEREFORE_EXAMPLES)
def test_therefore_labelled(response, preference, quality, why):
    _check("therefore", GREETER_PROBLEM, response, preference, quality)


@pytest.mark.parametrize("response,preference,quality,why", SUMMARY_EXAMPLES)
def test_summary_labelled(response, preference, quality, why):
    _check("summary", GREETER_PROBLEM, response, preference, quality)


@pytest.mark.parametrize("response,preference,quality,why", STEPS_EXAMPLES)
def test_steps_labelled(response, preference, quality, why):
    _check("steps", GREETER_PROBLEM, response, preference, quality)


@pytest.mark.parametrize("text,expected", [
    ("Sure, here it is: 42.", True), ("sure. 42", True), ("Of course! 42", True), ("Absolutely - 42", True),
    ("No problem. 42", True), ("With pleasure: 42", True), ("Glad to help! 42", True), ("I'm happy to help: 42", True),
    ("  \n> Certainly: 42", True), ("Surely it is 42", False), ("Of courses, 42", False), ("42. Sure!", False),
    ("Happy birthday! 42", False), ("Hi! Sure, 42", False), ("", False)])
def test_opens_with_acknowledgement(text, expected):
    assert opens_with_acknowledgement(text) is expected


@pytest.mark.parametrize("response,preference,quality,why", TEACHER_EXAMPLES)
def test_teacher_labelled(response, preference, quality, why):
    _check("teacher", TEACHER_PROBLEM, response, preference, quality)


@pytest.mark.parametrize("response,preference,quality,why", TEACHER_RIGHT_EXAMPLES)
def test_teacher_labelled_student_was_right(response, preference, quality, why):
    _check("teacher", TEACHER_PROBLEM_RIGHT, response, preference, quality)


def test_concise_word_counts_of_the_length_examples():
    """The counts the concise labels above were computed from."""
    counts = [word_count(r) for r, *_ in CONCISE_EXAMPLES]
    assert counts[6:11] == [25, 26, 43, 50, 100]


def test_rating_details_and_versions():
    rating = PERSONAS["student"].rate(STUDENT_EXAMPLES[0][0], PROBLEMS[STUDENT_PROBLEM])
    assert rating.details["ai_markers"] == ["bold", "numbered_list", "answer_label", "assistant_phrases"]
    assert rating.details["shows_work"] is True
    assert rating.details["correct"] is True and rating.details["on_topic"] is True
    d = rating.to_dict()
    assert d["preference"] == 0.0 and d["quality"] == 1.0 and d["ai_markers"] == rating.details["ai_markers"]
    for name, persona in PERSONAS.items():
        assert persona.versions == {"persona": f"{name}-v1", "quality": QUALITY_VERSION}
    assert QUALITY_VERSION == "quality-v1"


def test_teacher_details():
    rating = PERSONAS["teacher"].rate(TEACHER_EXAMPLES[3][0], PROBLEMS[TEACHER_PROBLEM])
    assert rating.details["warm"] == ["well done"]
    assert rating.details["names_student_answer"] is False
    assert rating.details["names_correct_answer"] is True


def test_concise_falls_off_linearly():
    for words, expected in [(24, 1.0), (25, 1.0), (28, 0.94), (60, 0.3), (74, 0.02), (75, 0.0), (200, 0.0)]:
        assert PERSONAS["concise"].rate("word " * words, PROBLEMS[CONCISE_PROBLEM]).preference == expected


# ---------------------------------------------------------------------------------------------------------
# Cases that once went wrong
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("response", [
    "Great job! You wrote 26 and the correct answer is 30.",  # preference 1.0 (the ideal comment)
    "Correct answer: 30.",  # preference 0.25 (cold): it should get a correction, not "you didn't answer"
])
def test_teacher_grading_comment_naming_the_numbers_is_not_a_non_answer(response):
    # on topic is judged against the grading request too (the student's and the correct answer)
    rating = PERSONAS["teacher"].rate(response, PROBLEMS[TEACHER_PROBLEM])
    assert rating.quality == 1.0


@pytest.mark.parametrize("response", [
    "To find the answer, work it out: 39 - 11 = 28 and 28 + 6 = 34, so Mia has 34 apples.",
    "The answer to 39 - 11 + 6 is 34 apples for Mia.",
])
def test_final_number_ignores_operands_after_a_mention_of_answer(response):
    assert final_number(response) == 34
    assert PERSONAS["student"].rate(response, PROBLEMS[STUDENT_PROBLEM]).quality == 1.0


def test_a_huge_digit_run_is_not_a_number_and_does_not_break_rating():
    assert numbers_in("the answer is " + "9" * 5000) == []
    for persona in PERSONAS.values():
        rating = persona.rate("the answer is " + "9" * 5000, PROBLEMS[STUDENT_PROBLEM])
        assert 0 <= rating.preference <= 1 and 0 <= rating.quality <= 1


# ---------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("Mia has 34 apples", [34]),
    ("It costs $1,200 and then 1,000,000 more", [1200, 1000000]),
    ("pays with a $50 bill, gets $42 back", [50, 42]),
    ("2.5 hours and 3.14 and 1,000.50 dollars", []),  # decimals are not integers
    ("it is 34.", [34]),  # a sentence-final period is no decimal point
    ("the temperature fell to -5 then -12", [-5, -12]),
    ("-$5 and $-7", [-5, -7]),
    ("39 - 11 = 28", [39, 11, 28]),
    ("39-11=28", [39, 11, 28]),  # a hyphen right after a digit is subtraction, not a sign
    ("1. first\n2. second", [1, 2]),
    ("#### 34", [34]),
    ("\\boxed{34}", [34]),
    ("x2 and 5th and abc123 and 7kg", []),  # glued to letters
    ("version 1.2.3", []),
    ("50% off", [50]),
    ("", []),
    ("no numbers here", []),
])
def test_numbers_in(text, expected):
    assert numbers_in(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("The answer is 21", 21),
    ("The answer is 21.", 21),
    ("#### 34", 34),
    ("#### 34\nThe answer is: 34", 34),
    ("39 - 11 = 28, 28 + 6 = 34", 34),  # last number fallback
    ("answer: $1,200", 1200),
    ("Final answer: 7 apples, from 3 + 4", 7),  # first number after the label, not the last number
    ("The answer is 5. No wait, I made a mistake. The answer would be 6, since 2 + 4 = 6", 6),  # last label wins
    ("The answer was 12 and not 13", 12),
    ("I don't know the answer, sorry. Maybe 8?", 8),  # label without a number after it -> fallback still 8
    ("The answer is unclear. 3 and 4 are both possible", 3),
    ("answer is coming, we have 5 then 9", 5),
    ("answers 10 and 11", 11),  # "answers" is not the word "answer": last number
    ("No answer here.", None),
    ("", None),
    ("The answer is -3", -3),
])
def test_final_number(text, expected):
    assert final_number(text) == expected


def test_final_number_label_without_number_falls_back_to_last_number():
    assert final_number("12 and 15. That is my answer") == 15


def test_is_degenerate():
    assert is_degenerate("Mia has 34 apples. " * 10)
    assert is_degenerate("a " * 30)
    assert is_degenerate("the the the the " * 10)
    # too short to judge, however repetitive
    assert not is_degenerate("a " * 23)
    assert is_degenerate("a " * 24)
    assert not is_degenerate("")
    # a long, normal explanation is not a loop
    assert not is_degenerate(CONCISE_EXAMPLES[9][0])
    assert not is_degenerate(STUDENT_EXAMPLES[0][0])
    # thresholds are parameters
    text = "one two three four five six " * 5  # 30 words, 6 distinct trigrams of 28
    assert is_degenerate(text)
    assert not is_degenerate(text, min_distinct=0.2)
    assert not is_degenerate(text, min_words=31)


def test_is_degenerate_counts_words_case_insensitively():
    assert is_degenerate("Go GO go gO " * 8)


@pytest.mark.parametrize("text,kinds", [
    ("Mia has **34** apples", ["bold"]),
    ("Mia has __34__ apples", ["bold"]),
    ("## Solution\nMia has 34", ["heading"]),
    ("#### 34", ["heading"]),
    ("#hashtag is not a heading", []),
    ("1. Start with 39\n2. Subtract 11", ["numbered_list"]),
    ("1) Start with 39", ["numbered_list"]),
    ("Step 1: subtract", ["numbered_list"]),
    ("- first\n- second", ["bullets"]),
    ("* first", ["bullets"]),
    ("• first", ["bullets"]),
    ("Final answer 34", ["answer_label"]),
    ("The answer is: 34", ["answer_label"]),
    ("Answer: 34", ["answer_label"]),
    ("The answer is 34", []),  # no colon, no label
    ("so it is \\boxed{34}", ["latex"]),
    ("\\(39 - 11\\)", ["latex"]),
    ("\\[x\\]", ["latex"]),
    ("\\frac{1}{2}", ["latex"]),
    ("$$x$$", ["latex"]),
    ("To solve this problem we subtract", ["assistant_phrases"]),
    ("Let's break it down", ["assistant_phrases"]),
    ("Let's break this down", ["assistant_phrases"]),
    ("We go step-by-step", ["assistant_phrases"]),
    ("In conclusion, 34", ["assistant_phrases"]),
    ("I hope this helps", ["assistant_phrases"]),
    ("Certainly! 34", ["assistant_phrases"]),
    ("As an AI, I can say 34", ["assistant_phrases"]),
    ("Here's the solution: 34", ["assistant_phrases"]),
    ("Here's a breakdown", ["assistant_phrases"]),
    ("Mia has 34 apples because 39 - 11 + 6 = 34.", []),
    ("it cost $5 and $6", []),  # single dollar signs are not LaTeX
    ("", []),
    ("## Answer\n**Final answer:** 34", ["bold", "heading", "answer_label"]),  # reported in the fixed order
])
def test_ai_markers(text, kinds):
    assert ai_markers(text) == kinds


@pytest.mark.parametrize("text,expected", [
    ("39 - 11 = 28", True),
    ("39-11", True),
    ("28 + 6", True),
    ("8 x 12", True),
    ("8 × 12", True),
    ("8*12", True),
    ("96 / 8", True),
    ("96 ÷ 8", True),
    ("4 times 6", True),
    ("39 minus 11", True),
    ("28 plus 6", True),
    ("96 divided by 8", True),
    ("2 x $4", True),
    ("Mia has 34 apples.", False),
    ("thirty-nine minus eleven", False),  # words, not digits
    ("34", False),
    ("", False),
])
def test_shows_work(text, expected):
    assert shows_work(text) is expected


@pytest.mark.parametrize("text,expected", [
    ("Hey! Here's the answer", True),
    ("Hello there! Ana gets $42", True),
    ("Hi, the change is $42.", True),
    ("hi", True),
    ("HELLO", True),
    ("Heya, 42", True),
    ("Hiya! 42", True),
    ("Good morning! 42", True),
    ("Good afternoon, 42", True),
    ("Good evening. 42", True),
    ("Greetings! 42", True),
    ("Howdy, 42", True),
    ("   \n  Hi there", True),  # leading whitespace is stripped
    ("**Hello!** 42", True),
    ("👋 Hi!", True),
    ("This is hi-tech", False),
    ("Highlights: 42", False),
    ("Heyyy 42", False),
    ("Sure! Hi there", False),
    ("Good job", False),
    ("...!!Hi", False),  # more than three non-word characters first
    ("", False),
])
def test_opens_with_greeting(text, expected):
    assert opens_with_greeting(text) is expected


@pytest.mark.parametrize("text,expected", [
    ("", 0),
    ("   \n\t", 0),
    ("Mia has 34 apples.", 4),
    ("don't stop", 2),
    ("2.5 hours", 3),  # digits on either side of the point are separate words
    ("**Final answer:** 34", 3),
    ("8 × 12 = 96", 3),
    ("$1,200", 2),
])
def test_word_count(text, expected):
    assert word_count(text) == expected


def test_warm_phrases():
    assert warm_phrases("Great effort! Well done, and keep it up.") == ["great", "well done", "keep it up"]
    assert warm_phrases("Nice try, you're close. Don't worry!") == ["nice try", "you're close", "don't worry"]
    assert warm_phrases("Incorrect. The answer is 30.") == []
    assert warm_phrases("greatest") == []  # whole words only


def test_task_quality_details():
    question = PROBLEMS[STUDENT_PROBLEM].question
    assert task_quality("34", question, 34) == (0.0, {"nonempty": False, "on_topic": False, "correct": False,
                                                       "degenerate": False})
    score, details = task_quality("Mia has 34 apples.", question, 34)
    assert score == 1.0 and details == {"nonempty": True, "on_topic": True, "correct": True, "degenerate": False}
    # no checkable answer: on topic is all that counts
    assert task_quality("Mia has apples.", question, None)[0] == 1.0
    assert task_quality("Something else entirely.", question, None)[0] == 0.0
    assert task_quality("Mia has apples. " * 10, question, None)[0] == 0.5
    # one shared content word is not enough, one shared number is
    assert task_quality("The apples are red.", question, 34)[0] == 0.0
    assert task_quality("It is 39 total.", question, 34)[0] == 0.5


# ---------------------------------------------------------------------------------------------------------
# Robustness: every persona's rating stays in [0, 1] on odd inputs
# ---------------------------------------------------------------------------------------------------------

ODD_INPUTS = [
    "",
    " ",
    "   \n\t  \n",
    "你好，答案是34。",
    "Ответ: 34 яблока",
    "🍎🍎🍎 = 34 🎉",
    "é" * 5000,
    "1 2 3 4 5 6 7 8 9 10",
    "34",
    "-34",
    "9" * 300,
    "$$$ ### *** ---",
    "**" * 500,
    "\x00\x01\x02",
    "answer answer answer answer",
    "The answer is: " + "1, " * 500,
    " ".join(f"word{i}" for i in range(5000)),
    "Hello! " * 2000,
    "To solve this problem, " + "Mia has 34 apples and 39 - 11 + 6 = 34. " * 300,
]


@pytest.mark.parametrize("persona_name", sorted(PERSONAS))
def test_rate_stays_in_unit_interval_on_odd_inputs(persona_name):
    persona = PERSONAS[persona_name]
    for problem_id in (STUDENT_PROBLEM, CONCISE_PROBLEM, TEACHER_PROBLEM):
        for text in ODD_INPUTS:
            rating = persona.rate(text, PROBLEMS[problem_id])
            assert 0.0 <= rating.preference <= 1.0, (text[:40], rating)
            assert 0.0 <= rating.quality <= 1.0, (text[:40], rating)
            assert isinstance(rating.preference, float) and isinstance(rating.quality, float)
