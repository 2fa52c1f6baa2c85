"""Simulated users with a hidden preference: what they ask, how they rate an answer, how they react.

A persona never tells the agent its preference up front. It asks for something (a homework problem, grading
comments), rates the reply with its versioned rating function (`rate`), and reacts the way people do:

* pleased -> thanks or praise, or just moving on;
* not pleased -> an explicit correction that names the fix ("too long, one sentence please") with probability
  `correction_rate`, otherwise an implicit signal: asking again, or moving on without a word;
* an empty or off-topic reply -> a complaint that it did not answer (so a policy cannot please anyone by
  saying nothing);
* with probability `noise`, a reaction that does not match the rating (people misclick, change their mind,
  say "thanks" to a bad answer, or ask about something else).

Corrections are the only place the preference is ever spelled out, so they are what the hint judge turns into
OPD's teacher hint; thanks/complaints are what the PRM judge turns into Binary RL's +-1. `hint` is the
preference stated outright, used only to measure the base rate "with the hint in the prompt".

Everything is seeded: the same persona, seed and replies give the same conversation.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from personalization.problems import Problem
from personalization.rating import (
    QUALITY_VERSION,
    Rating,
    ai_markers,
    numbers_in,
    opens_with_acknowledgement,
    opens_with_greeting,
    shows_work,
    task_quality,
    warm_phrases,
    word_count,
)

__all__ = ["PERSONAS", "Persona", "Reaction", "get_persona", "student_answer_for"]

MET = 0.75  # a reply with preference satisfaction at least this pleases the persona


@dataclass(frozen=True)
class Reaction:
    text: str
    kind: str  # "positive" | "correction" | "retry" | "move_on" | "no_answer" | "noise"
    wants_retry: bool  # the user asks for another attempt at the same request
    pleased: bool  # what the rating said (before noise)


@dataclass(frozen=True)
class Persona:
    name: str
    description: str
    preference_kind: str  # "format" | "tone" | "length" | "content"
    rating_version: str
    hint: str  # the hidden preference stated outright
    requests: tuple[str, ...]  # templates: {question}, {student_answer}, {answer}
    corrections: tuple[str, ...]
    praise: tuple[str, ...] = ("perfect, thanks!", "great, thank you!", "nice, thanks", "that's great, thanks!")
    retries: tuple[str, ...] = ("hmm, can you try that again?", "try again please", "redo that one")
    move_on: tuple[str, ...] = ("ok", "ok, next time then", "hm ok")
    off_topic: tuple[str, ...] = ("btw what's a good name for a cat?", "unrelated, but is it going to rain today?")
    # an empty or off-topic reply gets a complaint about that, whatever the preference says
    no_answer: tuple[str, ...] = ("you didn't answer my question", "that doesn't answer it, try again",
                                  "?? that's not an answer")
    correction_rate: float = 0.7
    noise: float = 0.1
    # openings that would please the persona, scored on the live policy at every checkpoint (`probes.py`): the
    # log-probability shows learning that sampling cannot see yet; empty where the preference is no opening
    probes: tuple[str, ...] = ()
    preference_fn: Callable[[str, Problem], tuple[float, dict]] = field(default=None, repr=False)
    quality_fn: Callable[[str, Problem], tuple[float, dict]] | None = field(default=None, repr=False)

    # -- asking ---------------------------------------------------------------------------------------
    def request(self, problem: Problem, rng: random.Random) -> str:
        template = rng.choice(self.requests)
        return template.format(question=problem.question, answer=problem.answer,
                               student_answer=student_answer_for(problem))

    # -- rating ---------------------------------------------------------------------------------------
    def rate(self, response: str, problem: Problem) -> Rating:
        preference, details = self.preference_fn(response, problem)
        if self.quality_fn is not None:
            quality, quality_details = self.quality_fn(response, problem)
        else:
            quality, quality_details = task_quality(response, problem.question, problem.answer)
        return Rating(preference=round(float(preference), 4), quality=round(float(quality), 4),
                      details={**details, **quality_details})

    @property
    def versions(self) -> dict:
        return {"persona": self.rating_version, "quality": QUALITY_VERSION}

    # -- reacting -------------------------------------------------------------------------------------
    def react(self, rating: Rating, rng: random.Random, can_retry: bool) -> Reaction:
        pleased = rating.preference >= MET and rating.quality > 0
        if rng.random() < self.noise:
            pool = [(t, "positive") for t in self.praise] + [(t, "retry") for t in self.retries] + \
                   [(t, "move_on") for t in self.off_topic]
            text, _ = rng.choice(pool)
            return Reaction(text, "noise", wants_retry=False, pleased=pleased)
        if rating.quality == 0:
            return Reaction(rng.choice(self.no_answer), "no_answer", wants_retry=can_retry, pleased=False)
        if pleased:
            if rng.random() < 0.8:
                return Reaction(rng.choice(self.praise), "positive", wants_retry=False, pleased=True)
            return Reaction(rng.choice(self.move_on), "move_on", wants_retry=False, pleased=True)
        roll = rng.random()
        if roll < self.correction_rate:
            return Reaction(rng.choice(self.corrections), "correction", wants_retry=can_retry, pleased=False)
        if roll < self.correction_rate + (1 - self.correction_rate) / 2:
            return Reaction(rng.choice(self.retries), "retry", wants_retry=can_retry, pleased=False)
        return Reaction(rng.choice(self.move_on), "move_on", wants_retry=False, pleased=False)


def student_answer_for(problem: Problem) -> int:
    """The (fixed) answer the teacher persona's student handed in: right for about half of the problems, else off
    by a small slip, chosen by a hash of the problem id so every run grades the same work."""
    digest = int(hashlib.sha256(problem.id.encode()).hexdigest(), 16)
    if digest % 2 == 0:
        return problem.answer
    slip = 1 + (digest >> 1) % 5
    return problem.answer + slip if (digest >> 4) % 2 else max(0, problem.answer - slip)


# ---------------------------------------------------------------------------------------------------------
# The preference rules (versioned: bump a persona's rating_version when its rule changes)
# ---------------------------------------------------------------------------------------------------------

def plain_homework(response: str, problem: Problem) -> tuple[float, dict]:
    """student-v1: homework that does not read as AI-written. Each kind of AI marker (bold, headings, lists,
    "Final answer:" labels, LaTeX, stock assistant phrases) costs 0.5; a reply that shows no calculation at all
    is worth half (the work must still be there to copy)."""
    markers = ai_markers(response)
    work = shows_work(response)
    score = max(0.0, 1.0 - 0.5 * len(markers)) * (1.0 if work else 0.5)
    return score, {"ai_markers": markers, "shows_work": work}


def warm_specific_grading(response: str, problem: Problem) -> tuple[float, dict]:
    """teacher-v1: half for warmth (an encouraging phrase), a quarter each for naming the student's answer and
    the correct answer (specific comments, not "good job")."""
    warm = warm_phrases(response)
    numbers = set(numbers_in(response))
    names_student = student_answer_for(problem) in numbers
    names_correct = problem.answer in numbers
    score = 0.5 * bool(warm) + 0.25 * names_student + 0.25 * names_correct
    return score, {"warm": warm, "names_student_answer": names_student, "names_correct_answer": names_correct}


def grading_quality(response: str, problem: Problem) -> tuple[float, dict]:
    """Quality of grading comments: empty or trivial -> 0; else half for being on topic (a number of the problem
    or of the grading request, or two content words of the problem), half for stating the correct answer (the
    comment does not mislead the student); halved for a loop."""
    if word_count(response) < 2:
        return 0.0, {"nonempty": False, "on_topic": False, "correct": False, "degenerate": False}
    _, details = task_quality(response, problem.question, None)
    numbers = set(numbers_in(response))
    on_topic = details["on_topic"] or bool(numbers & {problem.answer, student_answer_for(problem)})
    correct = problem.answer in numbers
    score = (0.5 * on_topic + 0.5 * correct) * (0.5 if details["degenerate"] else 1.0)
    return score, {**details, "on_topic": on_topic, "correct": correct}


def one_sentence(response: str, problem: Problem) -> tuple[float, dict]:
    """concise-v1: 1 up to 25 words, falling linearly to 0 at 75 words."""
    words = word_count(response)
    score = 1.0 if words <= 25 else max(0.0, 1.0 - (words - 25) / 50)
    return score, {"words": words}


def greets_first(response: str, problem: Problem) -> tuple[float, dict]:
    """greeter-v1: the reply opens with a greeting ("Hi", "Hey", "Hello", "Good morning", ...)."""
    greets = opens_with_greeting(response)
    return float(greets), {"greets": greets}


_STEP_LABEL = re.compile(r"(?im)^\W{0,3}step\s+\d+\b")


def labelled_steps(response: str, problem: Problem) -> tuple[float, dict]:
    """steps-v1: the working laid out as labelled steps, each on its own line ("Step 1: ...", "**Step 2:** ...");
    half for one label, full from two on."""
    labels = len(_STEP_LABEL.findall(response))
    return min(1.0, labels / 2), {"step_labels": labels}


_LIST_ITEM = re.compile(r"(?m)^\s*\d+[.)]\s+\S")


def numbered_list(response: str, problem: Problem) -> tuple[float, dict]:
    """numbered-v1: the reply is laid out as a numbered list ("1. ...", "2) ..." at line starts); half for one
    item, full from two on."""
    items = len(_LIST_ITEM.findall(response))
    return min(1.0, items / 2), {"list_items": items}


_THEREFORE = re.compile(r"(?i)\btherefore\b")


def says_therefore(response: str, problem: Problem) -> tuple[float, dict]:
    """therefore-v1: the conclusion is marked with the word "therefore" (anywhere in the reply)."""
    found = bool(_THEREFORE.search(response))
    return float(found), {"therefore": found}


_IN_SUMMARY = re.compile(r"(?:^|[.!?:]\s+|\n)\W{0,3}in summary\b", re.IGNORECASE)


def ends_with_summary(response: str, problem: Problem) -> tuple[float, dict]:
    """summary-v1: the reply ends with a summary sentence that opens with "In summary" (any case; up to three
    non-word characters such as "**" before it): full when it opens a sentence of the last paragraph, half when
    it appears only earlier."""
    paragraphs = [p for p in re.split(r"\n\s*\n", response.strip()) if p.strip()]
    last = bool(paragraphs) and bool(_IN_SUMMARY.search(paragraphs[-1].strip()))
    anywhere = bool(_IN_SUMMARY.search(response.strip()))
    return (1.0 if last else 0.5 if anywhere else 0.0), {"summary_last": last, "summary_anywhere": anywhere}


def acknowledges_first(response: str, problem: Problem) -> tuple[float, dict]:
    """upbeat-v1: the reply opens by agreeing to the request ("Sure!", "Of course!", "Happy to help!", ...)."""
    acknowledges = opens_with_acknowledgement(response)
    return float(acknowledges), {"acknowledges": acknowledges}


PERSONAS: dict[str, Persona] = {
    "student": Persona(
        name="student",
        description="a student who wants homework answers that do not read as AI-written: plain sentences, the "
                    "working kept, no markdown, lists or 'Final answer' labels",
        preference_kind="format",
        rating_version="student-v1",
        hint="Write it like a student's own homework: plain sentences with the working, no bold, no lists, "
             "no headings and no 'Final answer' label.",
        requests=("can u help me with my homework? {question}", "homework help pls: {question}",
                  "need this for school tomorrow: {question}"),
        corrections=(
            "this looks way too AI-written. no bold, no lists and no final answer label, just plain sentences "
            "like a normal student",
            "my teacher will know this is AI lol. write it in plain sentences without lists or headings",
            "too formal. write it like a kid would, in plain sentences, no bullet points or bold",
        ),
        preference_fn=plain_homework,
    ),
    "teacher": Persona(
        name="teacher",
        description="a teacher who wants grading comments that are specific (the student's number and the "
                    "correct one) and friendly",
        preference_kind="tone+content",
        rating_version="teacher-v1",
        hint="Be warm and specific: start with something encouraging, and name the student's answer and the "
             "correct answer.",
        requests=("Please write grading comments for my student. Problem: {question} Student's answer: "
                  "{student_answer}. Correct answer: {answer}.",
                  "Grade this for me and write the comment to the student. Problem: {question} The student "
                  "wrote {student_answer}; the correct answer is {answer}."),
        corrections=(
            "too cold. be friendly and encouraging, and mention the student's answer and the correct one",
            "please be more specific and friendly: say what they got right and give the exact numbers",
            "that's not very encouraging. start with something positive and name the numbers",
        ),
        preference_fn=warm_specific_grading,
        quality_fn=grading_quality,
    ),
    "concise": Persona(
        name="concise",
        description="a busy user who wants the answer in one short sentence",
        preference_kind="length",
        rating_version="concise-v1",
        hint="Answer in one short sentence.",
        requests=("{question}", "quick question: {question}", "{question} thanks"),
        corrections=("too long, one sentence please", "shorter please, just the answer in one sentence",
                     "way too wordy. keep it to one short sentence"),
        preference_fn=one_sentence,
    ),
    "greeter": Persona(
        name="greeter",
        description="a user who likes to be greeted: the reply should open with a greeting (hi, hey, hello)",
        preference_kind="tone",
        rating_version="greeter-v1",
        hint="Start your reply with a friendly greeting such as 'Hi!' or 'Hey!'.",
        requests=("{question}", "{question} can you help?", "help me with this: {question}"),
        corrections=("you could at least say hi first. please start your reply with a greeting",
                     "a bit rude, no hello? start with a greeting next time",
                     "please start with a hi or hello before the answer"),
        preference_fn=greets_first,
        probes=("Hello!", "Hi!", "Hey!"),
    ),
    # Hint-only like greeter, but SmolLM2-135M told to open with "Sure!" still goes on to the problem, while told
    # to greet it drifts into small talk: the two tell "no signal" apart from "no capacity to follow".
    "upbeat": Persona(
        name="upbeat",
        description="a user who likes a willing, upbeat reply: it opens by agreeing to the request ('Sure!', "
                    "'Of course!') and then answers",
        preference_kind="tone",
        rating_version="upbeat-v1",
        hint='Start your reply with "Sure!" and then answer.',
        requests=("{question}", "could you do this one? {question}", "can you help me with this: {question}"),
        # phrased so that the CPU rules hint judge rewrites each into an instruction (a persona unit test)
        corrections=('a bit abrupt. start with "Sure!" and then answer',
                     'please start your reply with "Sure!" or "Of course!" next time',
                     'bit blunt, no "sure"? start with "Sure!" before the answer please'),
        preference_fn=acknowledges_first,
        probes=("Sure!", "Of course!"),
    ),
    # Hint-only like greeter and upbeat (SmolLM2-135M never writes "Step 1" labels unprompted), but of another
    # kind: a structure, which the model told follows while still working the problem (quality kept).
    "steps": Persona(
        name="steps",
        description="a user who wants the working laid out as labelled steps ('Step 1: ...', 'Step 2: ...')",
        preference_kind="structure",
        rating_version="steps-v1",
        hint="Write the working as labelled steps, one per line: Step 1, Step 2, and so on.",
        requests=("{question}", "can you show me how to solve this? {question}", "{question} show the working please"),
        corrections=("write it as Step 1, Step 2, Step 3", "too messy. write it as Step 1, Step 2",
                     "write it as Step 1, Step 2 please"),
        preference_fn=labelled_steps,
        probes=("Step 1:",),
    ),
    # A format: SmolLM2-135M rarely numbers its working unprompted and does when told, still on the problem.
    "numbered": Persona(
        name="numbered",
        description="a user who wants the answer laid out as a numbered list",
        preference_kind="format",
        rating_version="numbered-v1",
        hint="Format the answer as a numbered list.",
        requests=("{question}", "{question} can you walk me through it?", "how do I solve this? {question}"),
        corrections=("too messy. write it as a numbered list", "hard to follow, please use a numbered list next time",
                     "not very clear. use a numbered list"),
        preference_fn=numbered_list,
        probes=("1.",),
    ),
    # A vocabulary: SmolLM2-135M says "therefore" now and then unprompted (Binary RL has something to reinforce)
    # and far more often when told, without losing the problem.
    "therefore": Persona(
        name="therefore",
        description="a user who wants the conclusion marked with the word 'therefore', as a maths teacher would",
        preference_kind="vocabulary",
        rating_version="therefore-v1",
        hint='Use the word "therefore" before the answer.',
        requests=("{question}", "{question} please explain", "help with this one: {question}"),
        corrections=('that ending is too abrupt. use the word "therefore" before the answer',
                     'too abrupt. say "therefore" before the final answer',
                     'hmm, you forgot the "therefore". use the word "therefore" before the answer'),
        preference_fn=says_therefore,
    ),
    # A vocabulary that SmolLM2-135M never uses unprompted (hint-only) and, told by the judge's hint, uses at the
    # end while still working the problem ("In conclusion" it follows as often but loses quality, measured).
    "summary": Persona(
        name="summary",
        description="a user who wants the reply to end with a one-sentence summary that starts with 'In summary'",
        preference_kind="vocabulary",
        rating_version="summary-v1",
        hint='End your reply with a sentence that starts with "In summary" and gives the answer.',
        requests=("{question}", "{question} explain please", "can you work this out? {question}"),
        # phrased so that the CPU rules hint judge rewrites each into an instruction (a persona unit test)
        corrections=('I lost track. finish with "In summary" and the answer',
                     'please end your reply with "In summary" and the answer',
                     'end with a summary that starts with "In summary"'),
        preference_fn=ends_with_summary,
    ),
}


def get_persona(name: str) -> Persona:
    try:
        return PERSONAS[name]
    except KeyError:
        raise ValueError(f"unknown persona {name!r}; choose from {', '.join(PERSONAS)}") from None


def heldout_requests(persona: Persona, problems: Sequence[Problem], seed: int | str = 1234) -> list[str]:
    """The fixed evaluation prompts: one request per held-out problem, phrased with a fixed seed."""
    rng = random.Random(f"{persona.name}:{seed}")
    return [persona.request(p, rng) for p in problems]
