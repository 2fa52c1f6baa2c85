"""The SWE setting's per-step process reward (upstream's `SweRewardAgent`, without its alignment bug).

Every assistant turn is a step, keyed by its index over ALL turns (`StepRecord.index`); the score of step k is
`scores[k]`, and the judge of step k sees step k's own response, command and output. Upstream kept scores and debug
records only for steps that ran a command and then indexed them by turn: after the first format error every later
step got its neighbour's score and the judge read the wrong output (track2_spec §4.3, §7.1.1). Here:

* a format-error step (no bash block) scores -1, with no model call (it ran nothing, and the rubric calls that an
  error);
* the submit step is left to the outcome (None: unjudged, `compose_step_target` gives it the outcome alone), as
  upstream skipped it;
* every other step is judged:

`SweLLMJudge`: m votes (`--prm-m`) of the PRM engine through `prm.StepJudge` (seeds per step and vote, invalid votes
dropped, a step with no valid vote unjudged). Its input, upstream's semantics in our words: the issue (8,000
characters at most), the last 8 earlier steps (`$ command`, return code, output squeezed to 1,000 characters), the
step's whole response, and its result (return code and output, 4,000 characters at most, head and tail); the rubric
gives +1 when the command ran without unexpected errors, is relevant to the issue, and is useful (it gathers
needed information, tests, or makes a correct edit), else -1 (errors, irrelevant commands, going in circles, wrong
edits, wasted steps); reasoning first, then `\\boxed{1}` or `\\boxed{-1}`.

`SweRuleJudge` (CPU, deterministic), from facts the host observed, never from what the agent's commands printed:

* the host's sealed evaluation of the repository's diff after each step (the provider's `diff` tool with the lease's
  harness token: the share of FAIL_TO_PASS + PASS_TO_PASS that pass, once per distinct diff): a step that raised the
  share scores +1, one that lowered it -1 (potential-based: breaking and fixing again nets nothing);
* otherwise, +1 when the command ran without error (no timeout; exit status 0, or a test run's own status), is
  relevant (it names a file, module or function named in the issue or in a traceback the agent has seen, or runs
  the tests) and made progress: it left the repository in a state (diff) not seen before in the episode, or it ran
  the tests (:func:`.agent.is_test_run`: the command starts a test runner and exited 0 or 1) in a state whose tests
  were not run before; otherwise -1. The same unchanged state never earns twice. It asks the loop for the diff and
  the share after every command (`needs_diff`, `needs_progress`).
"""

from __future__ import annotations

import hashlib
import re

from slime.agentic.prm import PendingJudgements, StepJudge

_BASE_STATE = hashlib.sha256(b"").hexdigest()  # the empty diff: the base tree

ISSUE_CHARS = 8000
HISTORY_STEPS = 8
HISTORY_OUTPUT_CHARS = 1000
RESULT_CHARS = 4000

SYSTEM = ("You are a strict evaluator of a software engineering agent that fixes issues in a code repository by "
          "running one shell command per step. You judge a single step: the agent's response, the command it ran "
          "and what the command printed.")
RUBRIC = ("Judge only the current step. Give +1 only if all of these hold: the command ran without unexpected errors "
          "(a failing test run that shows the bug is expected, a crash or a typo is not); it is relevant to the "
          "issue; and it is useful: it gathers information that is needed, runs tests, or makes a correct edit. Give "
          "-1 if the command failed, is irrelevant, repeats earlier steps without progress, makes a wrong or buggy "
          "edit, or wastes the step. Reason briefly, then give the score as \\boxed{1} or \\boxed{-1}.")


def head_tail(text: str, limit: int) -> str:
    """`text` if it fits `limit`, else its head and tail with a note of what was left out in between."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... ({len(text) - 2 * half} characters omitted) ...\n{text[-half:]}"


def _history_line(record) -> str:
    if record.format_error:
        return f"[step {record.index}] (no bash block: format error, nothing ran)"
    output = head_tail(" ".join(record.output.split()), HISTORY_OUTPUT_CHARS)
    return f"[step {record.index}] $ {record.command}\nreturncode: {record.returncode}\n{output}"


def judge_messages(problem: str, records: list) -> list[dict]:
    """The judge's chat messages for the last record of `records` (earlier ones are its history)."""
    current, history = records[-1], records[:-1][-HISTORY_STEPS:]
    lines = "\n\n".join(_history_line(r) for r in history) or "(none)"
    user = (f"## Issue\n{head_tail(problem, ISSUE_CHARS)}\n\n"
            f"## Recent history ({len(history)} steps)\n{lines}\n\n"
            f"## Current step {current.index}: the agent's response\n{current.response}\n\n"
            f"## Result of the command\nreturncode: {current.returncode}\n"
            f"{head_tail(current.output, RESULT_CHARS) or '(no output)'}\n\n{RUBRIC}")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def fixed_score(record) -> tuple[bool, float | None]:
    """(decided, score) for the steps no judge looks at: a format error -1, the submit step unjudged."""
    if record.format_error:
        return True, -1.0
    if record.submit:
        return True, None
    return False, None


class SweLLMJudge:
    """m votes of a PRM engine per step on upstream's SWE judge input (`StepJudge`'s voting and stats)."""

    needs_diff = False

    def __init__(self, step_judge: StepJudge):
        self.step_judge = step_judge

    @property
    def stats(self) -> dict:
        return self.step_judge.stats

    async def score_step(self, problem: str, records: list, *, seed: int = 0) -> float | None:
        decided, score = fixed_score(records[-1])
        if decided:
            return score
        return await self.step_judge.score_messages(judge_messages(problem, records), step_index=records[-1].index,
                                                    seed=seed)


_PATH = re.compile(r"[\w./-]*\w\.py\b")
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b")
_CODE = re.compile(r"`([^`\n]+)`")
_IDENT = re.compile(r"[A-Za-z_]\w{3,}")
_TRACEBACK_FILE = re.compile(r'File "([^"]+)", line \d+, in (\w+)')
_COMMON = frozenset({"self", "None", "True", "False", "print", "import", "from", "return", "result", "value",
                     "python", "with", "this", "that", "pytest", "test", "tests", "assert", "raise", "raises",
                     "error", "Error", "Exception", "class", "def", "lambda", "list", "dict", "tuple", "str", "int",
                     "float", "bool", "none", "expected", "instead", "testbed"})


def names_in(text: str) -> set[str]:
    """Files, modules and identifiers a text names (what a command must mention to be "relevant")."""
    names: set[str] = set()
    for path in _PATH.findall(text):
        stem = path.rsplit("/", 1)[-1][:-3]
        names.update({path.rsplit("/", 1)[-1], stem})
    for dotted in _DOTTED.findall(text):
        names.update(part for part in dotted.split(".") if len(part) >= 4)
    for code in _CODE.findall(text):
        names.update(_IDENT.findall(code))
    for path, function in _TRACEBACK_FILE.findall(text):
        names.add(path.rsplit("/", 1)[-1])
        names.add(function)
    return {n for n in names if len(n) >= 4 and n not in _COMMON and n != "py"}


class SweRuleJudge:
    """The CPU judge (module docstring): the tests' share moved -> its sign; else error-free AND relevant AND
    progress (a new state, or the tests run in a state not tested before) -> +1, else -1."""

    needs_diff = True
    needs_progress = True

    def __init__(self, args=None):  # also a `--step-judge module:factory` factory: factory(args)
        self.stats = {"steps": 0, "unjudged_steps": 0}
        self._problem_names: dict[str, set[str]] = {}

    @staticmethod
    def ran_without_error(record) -> bool:
        if record.timed_out or record.returncode is None:
            return False
        return record.returncode == 0 or (record.tests_ran and record.returncode in (1, 2))

    def relevant(self, problem: str, records: list) -> bool:
        current = records[-1]
        if current.tests_ran:
            return True
        if problem not in self._problem_names:
            self._problem_names[problem] = names_in(problem)
        names = set(self._problem_names[problem])
        for earlier in records[:-1]:  # files and functions of the tracebacks seen so far
            for path, function in _TRACEBACK_FILE.findall(earlier.output):
                names.update({path.rsplit("/", 1)[-1], function})
        return any(name in current.command for name in names)

    @staticmethod
    def progress(records: list) -> bool:
        """A state not seen before in the episode, or tests run in a state whose tests were not run before (without
        tracked states: the diff changed, or tests ran)."""
        current, earlier = records[-1], records[:-1]
        if current.state is None:
            return bool(current.diff_changed) or current.tests_ran
        seen = {_BASE_STATE, *(r.state for r in earlier)}
        if current.state not in seen:
            return True
        return current.tests_ran and not any(r.tests_ran and r.state == current.state for r in earlier)

    async def score_step(self, problem: str, records: list, *, seed: int = 0) -> float | None:
        self.stats["steps"] += 1
        decided, score = fixed_score(records[-1])
        if decided:
            if score is None:
                self.stats["unjudged_steps"] += 1
            return score
        current = records[-1]
        if current.progress is not None and current.progress_before is not None \
                and current.progress != current.progress_before:
            return 1.0 if current.progress > current.progress_before else -1.0
        good = self.ran_without_error(current) and self.relevant(problem, records) and self.progress(records)
        return 1.0 if good else -1.0


class StepJudging(PendingJudgements):
    """Starts one judgement per step as the episode goes (`on_step` of `run_episode`) and collects them by step
    index afterwards (`scores(n_steps)`: one entry per assistant turn, None for a turn no judgement was started for)."""

    def __init__(self, judge, seed: int = 0):
        super().__init__()
        self.judge, self.seed = judge, seed

    async def on_step(self, episode, step) -> None:
        records = [r for r in episode.steps if r.index <= step.index]
        self.start(step.index, self.judge.score_step(episode.problem_statement, records, seed=self.seed))
