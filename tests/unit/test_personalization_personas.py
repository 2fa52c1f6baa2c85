"""Simulated users: seeded requests and reactions, the teacher's fixed student answers, the held-out prompts,
how the rules judge reads every reaction, and the shipped problem set."""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter

import pytest

from slime.conversation.judges.hint_rules import user_feedback_hint

from slime.conversation.judges.rules import classify_user_text
from personalization import problem_templates
from personalization.personas import (
    MET,
    PERSONAS,
    Persona,
    Reaction,
    get_persona,
    heldout_requests,
    student_answer_for,
)
from personalization.problems import DEFAULT_FILE, Problem, load_problems
from personalization.rating import Rating

ALL = load_problems()
TRAIN = load_problems("train")
HELDOUT = load_problems("heldout")
OOD = load_problems("ood")
NAMES = sorted(PERSONAS)

PLEASED = Rating(preference=1.0, quality=1.0, details={})
JUST_PLEASED = Rating(preference=MET, quality=0.5, details={})
DISPLEASED = Rating(preference=0.0, quality=1.0, details={})
JUST_DISPLEASED = Rating(preference=MET - 0.01, quality=1.0, details={})
NO_ANSWER = Rating(preference=1.0, quality=0.0, details={})  # "concise" but empty


def quiet(persona: Persona) -> Persona:
    return dataclasses.replace(persona, noise=0.0)


def reactions(persona: Persona, rating: Rating, n: int, seed: int, can_retry: bool = True) -> list[Reaction]:
    rng = random.Random(seed)
    return [persona.react(rating, rng, can_retry=can_retry) for _ in range(n)]


# ---------------------------------------------------------------------------------------------------------
# Determinism
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_requests_and_reactions(name):
    persona = PERSONAS[name]

    def run(seed):
        rng = random.Random(seed)
        out = []
        for problem in TRAIN[:25]:
            out.append(persona.request(problem, rng))
            for rating in (PLEASED, DISPLEASED, NO_ANSWER):
                out.append(persona.react(rating, rng, can_retry=True))
        return out

    assert run(7) == run(7)
    assert run(7) != run(8)


@pytest.mark.parametrize("name", NAMES)
def test_different_seeds_differ_over_50_draws(name):
    persona = PERSONAS[name]
    for rating in (PLEASED, DISPLEASED, NO_ANSWER):
        a = [r.text for r in reactions(persona, rating, 50, seed=1)]
        b = [r.text for r in reactions(persona, rating, 50, seed=2)]
        assert a != b


def test_request_does_not_touch_the_global_rng():
    random.seed(0)
    before = random.random()
    random.seed(0)
    PERSONAS["student"].request(ALL[0], random.Random(3))
    PERSONAS["student"].react(DISPLEASED, random.Random(3), can_retry=True)
    assert random.random() == before


@pytest.mark.parametrize("name", NAMES)
def test_request_fills_its_template(name):
    persona = PERSONAS[name]
    rng = random.Random(0)
    for problem in ALL:
        text = persona.request(problem, rng)
        assert problem.question in text
        assert "{" not in text and "}" not in text
        if name == "teacher":
            assert str(student_answer_for(problem)) in text and str(problem.answer) in text


# ---------------------------------------------------------------------------------------------------------
# Reactions
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("rating", [PLEASED, JUST_PLEASED], ids=["pleased", "just_pleased"])
def test_pleased_rating_gets_praise_or_move_on_without_retry(name, rating):
    persona = quiet(PERSONAS[name])
    got = reactions(persona, rating, 2000, seed=11)
    kinds = Counter(r.kind for r in got)
    assert set(kinds) == {"positive", "move_on"}
    assert kinds["positive"] / len(got) == pytest.approx(0.8, abs=0.04)
    for r in got:
        assert r.pleased is True and r.wants_retry is False
        assert r.text in (persona.praise if r.kind == "positive" else persona.move_on)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("rating", [DISPLEASED, JUST_DISPLEASED], ids=["displeased", "just_displeased"])
def test_displeased_rating_gets_corrections_at_the_configured_rate(name, rating):
    persona = quiet(PERSONAS[name])
    got = reactions(persona, rating, 2000, seed=12)
    kinds = Counter(r.kind for r in got)
    assert set(kinds) == {"correction", "retry", "move_on"}
    rate = persona.correction_rate
    assert kinds["correction"] / len(got) == pytest.approx(rate, abs=0.04)
    assert kinds["retry"] / len(got) == pytest.approx((1 - rate) / 2, abs=0.04)
    assert kinds["move_on"] / len(got) == pytest.approx((1 - rate) / 2, abs=0.04)
    for r in got:
        assert r.pleased is False
        pool = {"correction": persona.corrections, "retry": persona.retries, "move_on": persona.move_on}[r.kind]
        assert r.text in pool
        assert r.wants_retry is (r.kind != "move_on")


@pytest.mark.parametrize("rate", [0.0, 0.3, 1.0])
def test_correction_rate_is_honoured(rate):
    persona = dataclasses.replace(PERSONAS["concise"], noise=0.0, correction_rate=rate)
    got = reactions(persona, DISPLEASED, 2000, seed=13)
    share = sum(r.kind == "correction" for r in got) / len(got)
    assert share == pytest.approx(rate, abs=0.04)


@pytest.mark.parametrize("name", NAMES)
def test_displeased_without_retry_never_wants_retry(name):
    got = reactions(quiet(PERSONAS[name]), DISPLEASED, 500, seed=14, can_retry=False)
    assert {r.kind for r in got} == {"correction", "retry", "move_on"}
    assert not any(r.wants_retry for r in got)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("can_retry", [True, False])
def test_quality_zero_is_a_no_answer_complaint(name, can_retry):
    persona = quiet(PERSONAS[name])
    for rating in (NO_ANSWER, Rating(preference=0.0, quality=0.0, details={})):
        got = reactions(persona, rating, 300, seed=15, can_retry=can_retry)
        assert {r.kind for r in got} == {"no_answer"}
        assert all(r.text in persona.no_answer for r in got)
        assert all(r.wants_retry is can_retry for r in got)
        assert all(r.pleased is False for r in got)
    # every complaint text is used
    assert {r.text for r in reactions(persona, NO_ANSWER, 300, seed=15)} == set(persona.no_answer)


@pytest.mark.parametrize("name", NAMES)
def test_noise_rate_as_configured(name):
    persona = PERSONAS[name]
    assert persona.noise == 0.1
    for rating, pleased in ((PLEASED, True), (DISPLEASED, False), (NO_ANSWER, False)):
        got = reactions(persona, rating, 2000, seed=16)
        noisy = [r for r in got if r.kind == "noise"]
        assert len(noisy) / len(got) == pytest.approx(persona.noise, abs=0.03)
        pool = set(persona.praise) | set(persona.retries) | set(persona.off_topic)
        for r in noisy:
            assert r.text in pool and r.wants_retry is False and r.pleased is pleased


@pytest.mark.parametrize("noise", [0.0, 0.5, 1.0])
def test_noise_parameter_is_honoured(noise):
    persona = dataclasses.replace(PERSONAS["greeter"], noise=noise)
    got = reactions(persona, PLEASED, 2000, seed=17)
    assert sum(r.kind == "noise" for r in got) / len(got) == pytest.approx(noise, abs=0.04)


def test_react_end_to_end_from_real_ratings():
    persona = quiet(PERSONAS["greeter"])
    problem = next(p for p in ALL if p.id == "money-0")
    assert persona.react(persona.rate("Hi! Ana gets $42 in change.", problem), random.Random(0), True).pleased
    sad = persona.react(persona.rate("Ana gets $42 in change.", problem), random.Random(0), True)
    assert not sad.pleased and sad.kind in {"correction", "retry", "move_on"}
    empty = persona.react(persona.rate("", problem), random.Random(0), True)
    assert empty.kind == "no_answer" and empty.wants_retry


# ---------------------------------------------------------------------------------------------------------
# The teacher's student, the held-out prompts, lookup
# ---------------------------------------------------------------------------------------------------------

def test_student_answer_for_is_deterministic_half_right_and_never_negative():
    first = [student_answer_for(p) for p in ALL]
    assert first == [student_answer_for(p) for p in ALL]
    # it depends only on the id and the answer, not on the question text or object identity
    assert first == [student_answer_for(Problem(p.id, "", p.answer, p.split)) for p in ALL]
    right = sum(a == p.answer for a, p in zip(first, ALL))
    assert 0.35 < right / len(ALL) < 0.65
    for a, p in zip(first, ALL):
        assert isinstance(a, int) and a >= 0
        assert a == p.answer or 1 <= abs(a - p.answer) <= 5 or a == 0


def test_student_answer_for_small_answers_clamps_at_zero():
    wrong = [Problem(f"tiny-{i}", "q", 1, "train") for i in range(200)]
    answers = [student_answer_for(p) for p in wrong]
    assert min(answers) == 0 and all(a >= 0 for a in answers)


@pytest.mark.parametrize("name", NAMES)
def test_heldout_requests_fixed_and_only_heldout(name):
    persona = PERSONAS[name]
    first = heldout_requests(persona, HELDOUT)
    assert first == heldout_requests(persona, HELDOUT)
    assert first == heldout_requests(persona, HELDOUT, seed=1234)
    assert len(first) == len(HELDOUT) == 36
    train_questions = {p.question for p in TRAIN}
    for request, problem in zip(first, HELDOUT):
        assert problem.split == "heldout"
        assert problem.question in request
        assert not any(q in request for q in train_questions)
    # independent of the global random state and of any rng used before
    random.seed(99)
    assert heldout_requests(persona, HELDOUT) == first


def test_heldout_requests_depend_on_seed_and_persona():
    for name in NAMES:  # every persona has several phrasings, so 36 prompts differ somewhere
        persona = PERSONAS[name]
        assert heldout_requests(persona, HELDOUT, seed=1) != heldout_requests(persona, HELDOUT, seed=2)
    assert heldout_requests(PERSONAS["concise"], HELDOUT) != heldout_requests(PERSONAS["greeter"], HELDOUT)


def test_get_persona():
    for name in NAMES:
        assert get_persona(name) is PERSONAS[name]
    with pytest.raises(ValueError) as info:
        get_persona("pirate")
    message = str(info.value)
    assert "pirate" in message
    for name in ("student", "teacher", "concise", "greeter", "upbeat", "steps", "numbered", "therefore", "summary"):
        assert name in message


def test_persona_catalogue():
    assert set(PERSONAS) == {"student", "teacher", "concise", "greeter", "upbeat", "steps", "numbered", "therefore",
                             "summary"}
    for name, persona in PERSONAS.items():
        assert persona.name == name
        assert persona.rating_version == f"{name}-v1"
        assert persona.hint and persona.description and persona.requests and persona.corrections
        assert 0 < persona.correction_rate < 1 and 0 <= persona.noise < 1
        assert callable(persona.preference_fn)


# ---------------------------------------------------------------------------------------------------------
# What the rules judge makes of every reaction
# ---------------------------------------------------------------------------------------------------------

def _texts(field: str) -> list:
    return [pytest.param(name, text, id=f"{name}-{field}-{i}")
            for name in NAMES for i, text in enumerate(getattr(PERSONAS[name], field))]


@pytest.mark.parametrize("name,text", _texts("corrections"))
def test_corrections_read_as_negative(name, text):
    assert classify_user_text(text).score == -1, classify_user_text(text)


@pytest.mark.parametrize("name,text", _texts("retries") + _texts("no_answer"))
def test_retries_and_complaints_read_as_negative(name, text):
    assert classify_user_text(text).score == -1, classify_user_text(text)


@pytest.mark.parametrize("name,text", _texts("praise"))
def test_praise_reads_as_positive(name, text):
    assert classify_user_text(text).score == 1, classify_user_text(text)


@pytest.mark.parametrize("name,text", _texts("move_on") + _texts("off_topic"))
def test_move_on_reads_as_neutral(name, text):
    assert classify_user_text(text).score == 0, classify_user_text(text)


# ---------------------------------------------------------------------------------------------------------
# The problem set
# ---------------------------------------------------------------------------------------------------------

def test_problem_set_shape():
    assert len(ALL) == 168
    assert len(HELDOUT) == 36 and len(TRAIN) == 108 and len(OOD) == 24
    assert len({p.id for p in ALL}) == 168
    assert len({p.question for p in ALL}) == 168
    assert {p.split for p in ALL} == {"train", "heldout", "ood"}
    assert [p for p in ALL if p.split == "heldout"] == HELDOUT  # file order kept
    # out-of-template problems share no template with training: 6 templates of their own, 4 problems each
    ood_templates = Counter(p.id.rsplit("-", 1)[0] for p in OOD)
    assert len(ood_templates) == 6 and set(ood_templates.values()) == {4}
    assert not set(ood_templates) & {p.id.rsplit("-", 1)[0] for p in TRAIN + HELDOUT}
    for p in ALL:
        assert type(p.answer) is int and p.answer > 0
    # the last three of each of the 12 templates are held out
    per_template = Counter(p.id.rsplit("-", 1)[0] for p in HELDOUT)
    assert len(per_template) == 12 and set(per_template.values()) == {3}
    assert all(int(p.id.rsplit("-", 1)[1]) >= 9 for p in HELDOUT)


def test_out_of_template_problems_did_not_change_the_others():
    """The train and held-out problems are what they were before the out-of-template set was added (the
    results of earlier runs stay comparable): the same problems without the ood ones."""
    without = problem_templates.generate(ood_per_template=0)
    assert without == [g for g in problem_templates.generate() if g["split"] != "ood"]
    assert len(without) == 144 and without[0]["id"] == "apples-0" and without[-1]["id"] == "eggs-11"


def test_problem_file_equals_the_generator_output():
    generated = problem_templates.generate()
    assert json.loads(DEFAULT_FILE.read_text()) == generated
    assert DEFAULT_FILE.read_text() == json.dumps(generated, indent=1) + "\n"
    assert [(p.id, p.question, p.answer, p.split) for p in ALL] == \
        [(g["id"], g["question"], g["answer"], g["split"]) for g in generated]


def test_generator_is_seeded():
    assert problem_templates.generate(seed=0) == problem_templates.generate(seed=0)
    assert problem_templates.generate(seed=1) != problem_templates.generate(seed=0)
    small = problem_templates.generate(seed=3, per_template=4, heldout_per_template=1, ood_per_template=2)
    assert len(small) == 4 * len(problem_templates.TEMPLATES) + 2 * len(problem_templates.OOD_TEMPLATES)
    assert sum(g["split"] == "heldout" for g in small) == len(problem_templates.TEMPLATES)
    assert all(g["answer"] > 0 for g in small)


@pytest.mark.parametrize("split", ["test", "", "Train", "validation"])
def test_bad_split_is_rejected(split):
    with pytest.raises(ValueError, match="split"):
        load_problems(split)


def test_load_problems_from_another_file(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps([{"id": "x-0", "question": "What is 2 + 3?", "answer": "5", "split": "heldout"},
                                {"id": "x-1", "question": "What is 1 + 1?", "answer": 2, "split": "train"}]))
    assert load_problems(path=path) == [Problem("x-0", "What is 2 + 3?", 5, "heldout"),
                                        Problem("x-1", "What is 1 + 1?", 2, "train")]
    assert load_problems("train", path=str(path)) == [Problem("x-1", "What is 1 + 1?", 2, "train")]


@pytest.mark.parametrize("name", sorted(PERSONAS))
def test_every_correction_becomes_a_hint_for_the_cpu_rules_judge(name):
    """OPD learns only from corrections the hint judge accepts: the CPU runs use the rules judge, so each
    correction a persona can say must rewrite into an instruction (not be dropped as "no corrective feedback")."""
    for correction in PERSONAS[name].corrections:
        match, reason = user_feedback_hint(correction)
        assert match is not None, (correction, reason)
        assert match.hint.strip(), correction
