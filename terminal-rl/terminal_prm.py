"""The terminal setting's per-turn process reward (upstream's `TerminalPRMAgent`, its bugs fixed).

Each model turn becomes a record (upstream's `current`): the turn index, the assistant's text (first 2000
characters), its tool calls, their results, and whether a parse error was recorded. A judge scores it:

* `TerminalLLMJudge`: upstream's prompt semantics. The judge sees `{task_instruction, history, current}` as JSON and
  a rubric: +1 when the step is correct and helpful, the tool-call format is valid, the tool use is appropriate and
  the results show progress; otherwise -1, the score in `\\boxed{}`. History is chosen by `history_mode`
  (`head_tail`: the first 2 and the last 2 earlier turns; `last`: the last 3), with the assistant text of history
  turns replaced by "[OMITTED]". Differences, each for a bug of upstream (track2_spec §2.3, §7): tool results are
  cut at head and tail (upstream sent them whole, so one long output could overflow the judge's context); the
  whole reply is searched for the vote (upstream searched only its last 50 characters); `--prm-m` votes are taken
  (upstream made one call whatever m said); a failed call or a reply without a vote leaves the turn unjudged
  (upstream scored it 0).
* `TerminalRuleJudge` (CPU, no model), from facts the host observed, never from what the agent printed: after each
  turn the harness looks at the state (the provider's `progress` tool: a fingerprint of /app, and for each new
  fingerprint the share of the task's hidden tests that pass on a copy of /app, sealed like the final evaluation).
  A turn that raised that share scores +1, one that lowered it -1 (potential-based: going back and forth earns
  nothing); a turn with a parse error or a failed call (`[TOOL_ERROR]`, a non-zero exit status shown, a command
  still running at its timeout, a whole-sandbox budget gone over: an agent can print these only to lower its own
  score) -1; any other turn 0, so
  the same unchanged state never earns twice; the final answer (no call) is left to the outcome (None). Without
  the share (the Docker backend takes no snapshot), a clean turn that left /app in a state not seen before in the
  episode scores +1 and other clean turns 0: weaker, an agent can farm it by touching files.

Scores combine with the outcome per turn through `rewards.compose_step_target` (`--prm-step-coef`), as in the
tool-call setting; `--advantage-estimator step_wise` normalises them per (task group, turn index).
"""

from __future__ import annotations

import json
import re

from slime.agentic.prm import PendingJudgements, StepJudge

ASSISTANT_TEXT_CHARS = 2000
RESULT_CHARS = 2000
SYSTEM = ("You are an evaluator for a terminal agent that solves a task in a Linux shell by calling tools. You judge "
          "one step of the agent: its reasoning, its tool calls and what the tools returned.")
RUBRIC = ("Judge the step in `current`. Give +1 only if all of these hold: the step is correct and helpful for the "
          "task; the tool-call format is valid (no parse error); the tools are used appropriately; the results show "
          "progress toward completing the task. Otherwise give -1. Think briefly, then put the final score in "
          "\\boxed{}: \\boxed{1} or \\boxed{-1}.")
_NONZERO_EXIT = re.compile(r"exit status (-?[1-9]\d*)")


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


def turn_record(turn_idx: int, assistant_text: str, calls: list, results: list[tuple], parse_errors: int) -> dict:
    """Upstream's `current` for one turn. `calls` are `ToolCall`s, `results` (call, observation) pairs."""
    return {"turn_idx": turn_idx, "assistant_text": assistant_text[:ASSISTANT_TEXT_CHARS],
            "tool_calls": [{"tool_name": c.name, "args": c.arguments} for c in calls],
            "tool_results": [{"name": c.name, "args": c.arguments, "result": observation}
                             for c, observation in results],
            "parse_error_recorded": parse_errors > 0}


# the harness's facts about the state after a turn: kept out of what an LLM judge is shown
STATE_KEYS = ("state", "states_seen")


def select_history(records: list[dict], mode: str = "head_tail", k: int = 3) -> list[dict]:
    """The earlier turns the judge sees: `head_tail` the first 2 and the last 2 (each once), `last` the last k."""
    if mode == "head_tail":
        chosen = sorted({*range(min(2, len(records))), *range(max(0, len(records) - 2), len(records))})
    elif mode == "last":
        chosen = list(range(max(0, len(records) - k), len(records)))
    else:
        raise ValueError(f"history mode must be head_tail or last, got {mode!r}")
    return [{**records[i], "assistant_text": "[OMITTED]"} for i in chosen]


def judge_messages(task_instruction: str, history: list[dict], current: dict) -> list[dict]:
    def bounded(record: dict) -> dict:
        return {**record, "tool_results": [{**r, "result": _cut(str(r["result"]), RESULT_CHARS)}
                                           for r in record["tool_results"]]}

    def shown(record: dict) -> dict:
        return bounded({k: v for k, v in record.items() if k not in STATE_KEYS})

    payload = {"task_instruction": task_instruction, "history": [shown(r) for r in history],
               "current": shown(current)}
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": json.dumps(payload, ensure_ascii=False, indent=1) + "\n\n" + RUBRIC}]


class TerminalLLMJudge:
    """m votes of a PRM engine per turn (`StepJudge`'s voting and stats) on upstream's terminal judge input."""

    def __init__(self, step_judge: StepJudge, history_mode: str = "head_tail"):
        self.step_judge, self.history_mode = step_judge, history_mode
        select_history([], history_mode)  # validate the mode now

    @property
    def stats(self) -> dict:
        return self.step_judge.stats

    async def score_turn(self, task_instruction: str, records: list[dict], *, seed: int = 0) -> float | None:
        current = records[-1]
        messages = judge_messages(task_instruction, select_history(records[:-1], self.history_mode), current)
        return await self.step_judge.score_messages(messages, step_index=current["turn_idx"], seed=seed)


class TerminalRuleJudge:
    """The CPU judge: the host's look at the state decides (see the module docstring). Deterministic."""

    needs_progress = True  # run_episode looks at the state after every turn (`Episode.states`)

    def __init__(self, args=None):  # also a `--step-judge module:factory` factory: factory(args)
        self.stats = {"steps": 0, "unjudged_steps": 0}

    @staticmethod
    def failed(observation: str) -> bool:
        text = observation.strip()
        return (text.startswith("[TOOL_ERROR]") or "[The command is still running after" in text
                or "The episode is over: no more commands run.]" in text[-400:]  # a whole-sandbox budget
                or bool(_NONZERO_EXIT.search(text[-200:])))

    async def score_turn(self, task_instruction: str, records: list[dict], *, seed: int = 0) -> float | None:
        current = records[-1]
        self.stats["steps"] += 1
        if current["parse_error_recorded"]:
            return -1.0
        if not current["tool_results"]:
            self.stats["unjudged_steps"] += 1
            return None  # the final answer: the tests judge it
        if any(self.failed(str(r["result"])) for r in current["tool_results"]):
            return -1.0
        before, after = (current.get("state") or (None, None))
        if before is None or after is None:
            return 0.0  # no look at the state was taken: no evidence of progress either way
        if before.get("progress") is not None and after.get("progress") is not None:
            delta = float(after["progress"]) - float(before["progress"])
            return 1.0 if delta > 0 else -1.0 if delta < 0 else 0.0
        # no test share (Docker): a state never seen before in the episode, once
        seen = current.get("states_seen") or ()
        return 1.0 if after.get("fingerprint") is not None and after["fingerprint"] not in seen else 0.0


class TurnJudging(PendingJudgements):
    """Starts one judgement per turn as the episode goes (`on_turn` of `run_episode`) and collects them after."""

    def __init__(self, judge, task_instruction: str, seed: int = 0):
        super().__init__()
        self.judge, self.task_instruction, self.seed = judge, task_instruction, seed
        self.records: list[dict] = []

    async def on_turn(self, episode, turn, parsed, results) -> None:
        record = turn_record(len(self.records), turn.text, parsed.calls, results, len(parsed.errors))
        states = getattr(episode, "states", None) or []
        if len(states) == len(self.records) + 2:  # the host's look before and after this turn (none after a turn
            # that ended the episode), and the fingerprints seen before it
            record["state"] = (states[-2], states[-1])
            record["states_seen"] = tuple(s.get("fingerprint") for s in states[:-1])
        self.records.append(record)
        self.start(len(self.records) - 1,
                   self.judge.score_turn(self.task_instruction, list(self.records), seed=self.seed))
