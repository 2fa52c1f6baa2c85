"""A process reward model (PRM) for agent steps: an LLM judge, through the engine protocol, votes `\\boxed{1}` or
`\\boxed{-1}` on each step of a trajectory (upstream's step-wise PRM for ReTool, terminal, SWE and GUI).

    judge = StepJudge(AsyncEngineClient(prm_url), m=3, temperature=0.6, max_new_tokens=1024)
    score = await judge.score(problem, history, action, observation, step_index=k, seed=base)   # mean vote or None

The judge sees the problem, the trajectory so far, the current action and what the environment answered, and must not
continue the trajectory. Differences from upstream, each for a bug it had (track2_spec §5.3, §7.1): the prompt is sent
as chat messages to the PRM's own server (`/v1/chat/completions`), so the PRM's own template and tokenizer render
it (upstream rendered with the policy's tokenizer in some settings and sent raw template tokens in the text); the
trajectory shown is capped (upstream's grew without limit); every (step, vote) gets its own seed (upstream reused
one per step); a vote that is not `\\boxed{±1}` is an invalid vote, and a step with no valid vote is unjudged
(None), not a 0. Scores combine with the outcome through `rewards.compose_step_target` (the coef is honoured).
"""

from __future__ import annotations

import asyncio

from slime.agentic.rewards import mean_vote, parse_boxed_vote

SYSTEM = ("You are a process reward model (PRM). Judge whether the current step of an agent is helpful and correct "
          "for solving the problem, given the trajectory so far and what the environment answered. Think briefly, "
          "then give your decision as exactly one of: \\boxed{1} (helpful and correct) or \\boxed{-1} (not).")
MAX_TRAJECTORY_CHARS = 6000
MAX_PART_CHARS = 3000


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "[... earlier steps omitted ...]\n" + text[-limit:]


def _head(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\n[... truncated ...]"


def judge_messages(problem: str, history: str, action: str, observation: str, step_index: int) -> list[dict]:
    """The judge's chat messages for one step (plain text: no chat-template tokens of the policy inside)."""
    user = (f"Problem:\n{_head(problem, MAX_PART_CHARS)}\n\n"
            f"Step index: {step_index}\n\n"
            f"Trajectory so far (before this step):\n{_tail(history, MAX_TRAJECTORY_CHARS) or '(none)'}\n\n"
            f"Current action:\n{_head(action, MAX_PART_CHARS)}\n\n"
            f"Next state / observation:\n{_head(observation, MAX_PART_CHARS) or '(none)'}\n\n"
            "Judge only the current action. Do NOT continue the trajectory. "
            "Answer with \\boxed{1} or \\boxed{-1}.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


class StepJudge:
    """m votes per step from an engine serving the PRM; `score` returns their mean (None: no valid vote)."""

    def __init__(self, client, *, m: int = 3, temperature: float = 0.6, max_new_tokens: int = 1024,
                 max_concurrency: int = 16):
        if m < 1:
            raise ValueError(f"m must be >= 1, got {m}")
        self.client, self.m, self.temperature, self.max_new_tokens = client, m, temperature, max_new_tokens
        self.slots = asyncio.Semaphore(max_concurrency)  # one cap for every trajectory's judge calls
        self.stats = {"steps": 0, "votes": 0, "invalid_votes": 0, "failed_calls": 0, "unjudged_steps": 0}

    async def _vote(self, messages: list[dict], seed: int) -> int | None:
        body = {"messages": messages, "temperature": self.temperature, "max_tokens": self.max_new_tokens,
                "seed": seed}
        try:
            async with self.slots:
                reply = await self.client.chat(body)
        except Exception:  # noqa: BLE001 - a failed call is a missing vote, the step may still be judged
            self.stats["failed_calls"] += 1
            return None
        text = ((reply.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
        vote = parse_boxed_vote(text)
        self.stats["votes"] += 1
        if vote is None:
            self.stats["invalid_votes"] += 1
        return vote

    async def score(self, problem: str, history: str, action: str, observation: str, *, step_index: int,
                    seed: int = 0) -> float | None:
        return await self.score_messages(judge_messages(problem, history, action, observation, step_index),
                                         step_index=step_index, seed=seed)

    async def score_messages(self, messages: list[dict], *, step_index: int, seed: int = 0) -> float | None:
        """m votes on judge messages a setting built itself (e.g. the terminal judge's); their mean or None."""
        votes = await asyncio.gather(*(self._vote(messages, seed * 1_000_003 + step_index * 1_009 + v)
                                       for v in range(self.m)))
        self.stats["steps"] += 1
        score = mean_vote(votes)
        if score is None:
            self.stats["unjudged_steps"] += 1
        return score


class PendingJudgements:
    """The step judgements of one episode: each is started as its step ends (judging overlaps the rest of the
    episode) and collected by step index afterwards. The settings' collectors (terminal `TurnJudging`, SWE and GUI
    `StepJudging`) add how they frame a step for their judge."""

    def __init__(self):
        self.tasks: dict[int, asyncio.Task] = {}

    def start(self, index: int, judgement) -> None:
        self.tasks[index] = asyncio.create_task(judgement)

    async def scores(self, n_steps: int | None = None) -> list[float | None]:
        """One entry per step 0..n_steps-1 (default: up to the last started), None where no judgement started."""
        done = dict(zip(self.tasks, await asyncio.gather(*self.tasks.values()))) if self.tasks else {}
        n = n_steps if n_steps is not None else (max(self.tasks) + 1 if self.tasks else 0)
        return [done.get(k) for k in range(n)]

    def cancel(self) -> None:
        for task in self.tasks.values():
            task.cancel()


_JUDGES: dict = {}


def judge_from_args(args, *, rules, llm=None):
    """The step judge of `--step-judge` for a setting, one per event loop (its engine client is bound to the loop):
    `rules` -> `rules()` (the setting's CPU judge); `llm` -> a `StepJudge` on the PRM engine (`--prm-enable` or
    `--prm-engine-url`; m `--prm-m` votes at `--prm-temperature`), wrapped by `llm(judge)` when the setting frames
    the judge's input itself; `module:factory` -> `factory(args)`. Default: `llm` when a PRM engine is configured,
    else None (no step judge)."""
    url = getattr(args, "prm_engine_url", None)
    group = getattr(args, "judge_engines", None)
    kind = getattr(args, "step_judge", None)
    if kind is None:
        kind = "llm" if getattr(args, "prm_enable", False) and (url or group) else None
    if kind is None:
        return None
    key = (id(asyncio.get_running_loop()), kind, url or (group.url if group else None), rules, llm)
    if key in _JUDGES:
        return _JUDGES[key]
    if kind == "rules":
        judge = rules()
    elif kind == "llm":
        if not (url or group):
            raise ValueError("--step-judge llm needs a PRM engine: --prm-enable (hosted) or --prm-engine-url URL")
        from slime.rollout.default_rollout import get_engine_client

        judge = StepJudge(get_engine_client(args, url or group.url), m=int(getattr(args, "prm_m", 3) or 3),
                          temperature=float(getattr(args, "prm_temperature", 0.6)),
                          max_new_tokens=int(getattr(args, "prm_max_new_tokens", 1024) or 1024))
        if llm is not None:
            judge = llm(judge)
    else:
        from slime.utils.plugins import import_factory

        judge = import_factory(kind, "--step-judge", "built-in judges: llm, rules")(args)
    _JUDGES[key] = judge
    return judge
