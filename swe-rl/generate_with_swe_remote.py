"""The SWE agent (upstream's mini-swe-agent loop, without litellm): THOUGHT + exactly one bash block per step, run in
the instance's sandboxed repository through the environment service (the `swe` provider), until the submit command.

    --extra-python-path swe-rl
    --custom-generate-function-path generate_with_swe_remote.generate
    --custom-rm-path generate_with_swe_remote.reward_func
    --env-provider swe  (instances: $SWE_INSTANCES, default swe-rl/data/instances.jsonl)

This folder's method (upstream's `generate_with_swe_remote.py` plays the same role; its prompts: `swe_templates.py`,
its step judges: `swe_prm.py`).

Per episode: allocate a lease (`request_id` names the instance, seed, group and index), reset it to a fresh tree of
the instance, then at most `max_steps` times (`--max-turns`, `$MAX_STEPS`, default 20):

1. heartbeat; the context (the whole trajectory while it fits `rollout_max_context_len - max_new_tokens`, else the
   head/tail context manager, :func:`manage_context`); generate (exact ids and log-probs);
2. the first ```bash block of the response (:func:`parse_bash_block`); none: the format-error observation
   (``<returncode>-1</returncode><output>..</output>``, no reminder) and on to the next step;
3. `exec` (`bash`); a command holding the submit sentinel ends the episode, its output with the sentinel line
   stripped is the patch (kept when it is a git diff: :func:`submitted_patch`);
4. otherwise the observation (:func:`templates.observation`: return code, output with the 10,000-character
   elision, turns-left reminder).

No valid submitted patch: the repository's diff (the `diff` tool: upstream's diff fallback). The patch is evaluated
by the provider in a fresh tree (sealed: :func:`.evaluate.evaluate_patch`), never the agent's; an empty patch is
not evaluated. Reward +1 resolved, -1 otherwise.

Training samples (`--dynamic-history` selects, as in the tool-call setting): one per step (the prompt is exactly the
ids the engine got at that step, the response exactly the ids it sampled, with their log-probs), or one per
trajectory (prompt = [system, problem]; response = every later message: the sampled ids of each step with loss
mask 1 and log-probs, the observations between them with mask 0). The policy builds its context incrementally
(step k+1's context = step k's context + its sampled ids + the observation's tokens), so while the context manager
has not cut anything the trajectory sample is exactly what the model saw; a step generated from a cut context
(upstream trained those off-policy, track2_spec §7.1.11) keeps loss mask 0 in the trajectory sample.

PRM per step (`--step-judge rules|llm|module:factory`, :mod:`.prm`): one score per assistant turn, keyed by its
index (a format-error step gets its own score: upstream shifted every later score by one, §4.3).
"""

from __future__ import annotations

import logging
import hashlib
import math
import os
import re
import shlex
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field

from slime.agentic import rewards
from slime.agentic.env_service.client import EnvServiceError
from slime.agentic.env_service.providers import HARNESS_TOKEN_KEY
from slime.agentic.agent_loop import Turn, engine_weight_version, failed_sample, turn_sample
from slime.utils.types import Sample

import swe_templates as templates

from slime.agentic.swe.patches import patch_format_problem, patch_paths
from slime.agentic.swe.provider import DEFAULT_EXEC_TIMEOUT_S, INSTANCES_ENV, timeout_message

logger = logging.getLogger(__name__)

DEFAULT_MAX_STEPS = 20
DEFAULT_HEAD_RATIO = 0.3
_BASH_BLOCK = re.compile(r"```bash[ \t]*\r?\n(.*?)```", re.DOTALL)
_TEST_RUNNERS = frozenset({"pytest", "py.test", "tox", "nox"})
_SEGMENTS = re.compile(r"&&|\|\||[;|&\n]")


# ------------------------------------------------------------------------------------------------ parsing


def parse_bash_block(text: str) -> str | None:
    """The command of the first ```bash block of a response (upstream runs the first); None when there is none or
    it is empty. Blocks in other languages (```python, ```sh, a bare ```) are not commands."""
    match = _BASH_BLOCK.search(text or "")
    if match is None:
        return None
    command = match.group(1).strip("\n")
    return command if command.strip() else None


def is_submit(command: str) -> bool:
    return templates.SUBMIT_SENTINEL in command


def submitted_patch(output: str) -> str | None:
    """The patch of a submit command's output: what follows the sentinel line, kept when it is a git diff."""
    at = output.find(templates.SUBMIT_SENTINEL)
    if at < 0:
        return None
    patch = output[at + len(templates.SUBMIT_SENTINEL):].lstrip("\r\n")
    return patch if patch_format_problem(patch) is None else None


def runs_tests(command: str) -> bool:
    """Whether the command the host ran starts a test runner as a program of one of its pipeline segments (``pytest``,
    ``py.test``, ``tox``, ``nox``, ``python -m pytest|unittest``; after ``VAR=value`` prefixes, ``cd ... &&``,
    ``timeout N``). ``echo pytest`` or ``cat pytest.ini`` do not."""
    for segment in _SEGMENTS.split(command):
        try:
            words = shlex.split(segment)
        except ValueError:
            words = segment.split()
        while words and (re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]) or words[0] in ("env", "time", "command")):
            words = words[1:]
        if words[:1] == ["timeout"]:
            words = [w for w in words[1:] if not w.startswith("-")][1:]
        if not words:
            continue
        program = os.path.basename(words[0])
        if program in _TEST_RUNNERS:
            return True
        if re.fullmatch(r"python[\d.]*", program) and "-m" in words[:-1]:
            if words[words.index("-m") + 1] in ("pytest", "unittest"):
                return True
    return False


def is_test_run(command: str, returncode: int | None) -> bool:
    """A test run, from what the host observed (never from the output, which the agent's code prints): the command
    it ran starts a test runner (:func:`runs_tests`) and ended with a test runner's own status (0: all passed, 1:
    some failed). What a test runner the agent shadowed (a ``pytest.py`` of its own) does is not known here: the
    rule judge credits a test run once per state of the repository."""
    return runs_tests(command) and returncode in (0, 1)


# ------------------------------------------------------------------------------------------------ context


@dataclass
class ManagedContext:
    messages: list[dict]
    omitted_turns: int = 0


def pair_groups(messages: list[dict], head: int = 2) -> list[list[dict]]:
    """The messages after the first `head`, as turns: an assistant message and the observation(s) that answer it."""
    groups: list[list[dict]] = []
    for m in messages[head:]:
        if m["role"] == "assistant" or not groups:
            groups.append([m])
        else:
            groups[-1].append(m)
    return groups


def manage_context(messages: list[dict], count_tokens: Callable[[list[dict]], int], max_tokens: int,
                   head_ratio: float = DEFAULT_HEAD_RATIO) -> ManagedContext | None:
    """Upstream's head/tail context manager at turn granularity, measured with `count_tokens` (the policy's chat
    template). Over budget: keep [system, problem], then as many turns from the front as fit `floor(head_ratio *
    available)`, then, after an omission note, as many of the latest turns as fit the rest (`available` = the budget
    less the system, the problem and the note). The latest turn is always kept (the model must see its last
    observation); None when not even [system, problem, note, latest turn] fit."""
    if count_tokens(messages) <= max_tokens:
        return ManagedContext(list(messages))
    head, turns = list(messages[:2]), pair_groups(messages)
    if not turns:
        return None
    base = count_tokens(head)
    fixed = count_tokens(head + [templates.omitted_note(len(turns))])
    available = max_tokens - fixed
    if available <= 0:
        return None
    costs = [count_tokens(head + t) - base for t in turns]
    head_budget = math.floor(head_ratio * available)
    n_head, used = 0, 0
    while n_head < len(turns) - 1 and used + costs[n_head] <= head_budget:
        used += costs[n_head]
        n_head += 1
    while True:
        tail_budget, tail = available - sum(costs[:n_head]), []
        for i in range(len(turns) - 1, n_head - 1, -1):
            if sum(costs[j] for j in tail) + costs[i] > tail_budget:
                break
            tail.append(i)
        if tail or n_head == 0:
            break
        n_head -= 1  # the latest turn must be shown: give its room back from the head
    if not tail:
        return None
    tail.reverse()
    while True:
        kept_head, kept_tail = turns[:n_head], [turns[i] for i in tail]
        omitted = len(turns) - n_head - len(tail)
        middle = [templates.omitted_note(omitted)] if omitted else []
        candidate = head + [m for t in kept_head for m in t] + middle + [m for t in kept_tail for m in t]
        if count_tokens(candidate) <= max_tokens:  # pieces rendered apart may differ by a token or two together
            return ManagedContext(candidate, omitted)
        if n_head:
            n_head -= 1
        elif len(tail) > 1:
            tail.pop(0)
        else:
            return None


# ------------------------------------------------------------------------------------------------ policy


@dataclass
class StepTurn(Turn):
    managed: bool = False  # the context was not the trajectory's own prefix (the context manager cut it)


@dataclass
class Piece:
    kind: str  # prompt | step | observation
    ids: list[int]
    logprobs: list[float] | None = None  # step: the engine's
    exact: bool = True  # step: generated from the trajectory's own prefix


class SweEnginePolicy:
    """The policy behind an engine of our protocol (`/generate` with ids and log-probs), for one episode.

    The context is built from ids, not re-rendered text: step 0 gets [system, problem] rendered with the policy's
    chat template; step k+1 gets step k's context + the ids step k sampled + the tokens the template puts after an
    assistant message and around the observation (found once with a fixed base conversation, as upstream's
    "fixed-base" encoding). When that no longer fits, the messages are cut by `manage_context` and rendered."""

    def __init__(self, client, tokenizer, sampling_params: dict, max_context_tokens: int,
                 head_ratio: float = DEFAULT_HEAD_RATIO):
        self.client, self.tokenizer = client, tokenizer
        self.sampling_params = dict(sampling_params)
        self.max_new_tokens = int(self.sampling_params.get("max_new_tokens") or 1024)
        self.max_context_tokens = int(max_context_tokens)
        self.max_input_tokens = self.max_context_tokens - self.max_new_tokens
        if self.max_input_tokens <= 0:
            raise ValueError(f"the context ({max_context_tokens} tokens) leaves no room for a prompt beside "
                             f"{self.max_new_tokens} new tokens")
        self.head_ratio = head_ratio
        self.pieces: list[Piece] = []
        self._covered = 0  # messages the pieces stand for
        self._closing: str | None = None
        self._last_finish = "stop"

    def render(self, messages: list[dict]) -> list[int]:
        from slime.models.chat_template import render_prompt_ids

        return render_prompt_ids(self.tokenizer, messages)

    def _text(self, messages: list[dict], generation: bool) -> str:
        from slime.models.chat_template import render_text

        return render_text(self.tokenizer, messages, add_generation_prompt=generation)

    _BASE = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
             {"role": "assistant", "content": "A"}]

    def closing_text(self) -> str:
        """What the template writes after an assistant message's content (e.g. ``<|im_end|>\\n``)."""
        if self._closing is None:
            before, after = self._text(self._BASE[:2], True), self._text(self._BASE, False)
            if not after.startswith(before + "A"):
                raise ValueError("the chat template does not render an assistant message after its generation prompt")
            self._closing = after[len(before) + 1:]
        return self._closing

    def observation_text(self, message: dict) -> str:
        """The template's text for a user message after an assistant message, through the next generation prompt."""
        before = self._text(self._BASE, False)
        after = self._text(self._BASE + [message], True)
        if not after.startswith(before):
            raise ValueError("the chat template re-renders earlier messages when a user message follows")
        return after[len(before):]

    def _glue(self, last: Piece, message: dict, finish_reason: str) -> list[int]:
        closing = self.closing_text()
        if last.ids and finish_reason == "stop":
            # the model sampled the end of its turn (its EOS, e.g. <|im_end|>): only the rest of the closing follows
            end = self.tokenizer.decode(last.ids[-1:], skip_special_tokens=False)
            if end and closing.startswith(end):
                closing = closing[len(end):]
        return self.tokenizer.encode(closing + self.observation_text(message), add_special_tokens=False)

    @property
    def trajectory_ids(self) -> list[int]:
        return [t for p in self.pieces for t in p.ids]

    async def generate_turn(self, messages: list[dict], tools=None) -> StepTurn | None:
        if not self.pieces:
            self.pieces.append(Piece("prompt", self.render(messages[:2])))
            self._covered = 2
        else:
            new = messages[self._covered:]
            if len(new) != 2 or new[0]["role"] != "assistant" or new[1]["role"] != "user" or \
                    self.pieces[-1].kind != "step":
                raise ValueError("SweEnginePolicy: each turn must add the last response and one observation")
            self.pieces.append(Piece("observation", self._glue(self.pieces[-1], new[1], self._last_finish)))
            self._covered = len(messages)
        full = self.trajectory_ids
        managed, omitted = False, 0
        if len(full) <= self.max_input_tokens:
            input_ids = full
        else:
            # every candidate stays referenced here, so an identity match cannot hit a recycled object's id
            rendered: list[tuple[list[dict], list[int]]] = []

            def count(candidate: list[dict]) -> int:
                rendered.append((candidate, self.render(candidate)))
                return len(rendered[-1][1])

            cut = manage_context(messages, count, self.max_input_tokens, self.head_ratio)
            if cut is None:
                return None
            # a context that fits when rendered afresh comes back as a copy that was never counted: render it
            ids = next((ids for candidate, ids in rendered if candidate is cut.messages), None)
            input_ids, managed, omitted = ids or self.render(cut.messages), True, cut.omitted_turns
        start = time.monotonic()
        output = await self.client.generate(input_ids=input_ids, sampling_params=self.sampling_params,
                                            return_logprob=True)
        meta = output.get("meta_info") or {}
        entries = meta.get("output_token_logprobs") or []
        ids, lps = [int(e[1]) for e in entries], [float(e[0]) for e in entries]
        self._last_finish = (meta.get("finish_reason") or {}).get("type", "stop")
        self.pieces.append(Piece("step", ids, lps, exact=not managed))
        return StepTurn(input_ids=list(input_ids), output_ids=ids, logprobs=lps, text=output.get("text", ""),
                        finish_reason=self._last_finish, omitted_messages=omitted,
                        latency_ms=(time.monotonic() - start) * 1000, managed=managed,
                        weight_version=engine_weight_version(meta))


class ScriptedSwePolicy:
    """Says the given responses in order (then a response without a command): scripted agents for tests and the
    load check. Ids are the text's bytes, so step samples stay well-formed."""

    def __init__(self, responses: list[str], final: str = "THOUGHT: I have nothing more to do."):
        self.responses, self.final = list(responses), final

    async def generate_turn(self, messages: list[dict], tools=None) -> StepTurn:
        text = self.responses.pop(0) if self.responses else self.final
        data = text.encode()
        return StepTurn(input_ids=list(str(len(messages)).encode()), output_ids=list(data),
                        logprobs=[0.0] * len(data), text=text, finish_reason="stop")


def bash_response(command: str, thought: str = "I run the next command.") -> str:
    """A well-formed response: a THOUGHT and one bash block."""
    return f"THOUGHT: {thought}\n\n```bash\n{command}\n```"


def gold_patch_responses(patch: str) -> list[str]:
    """The scripted agent that knows the fix: apply `patch` with `git apply` through the bash loop, then submit (the
    load check's and the harness's baseline agent)."""
    marker = "GOLD_PATCH_EOF"
    if marker in patch:
        raise ValueError(f"the patch contains the here-document marker {marker}")
    return [bash_response(f"git apply <<'{marker}'\n{patch}{marker}", "I apply the fix."),
            bash_response(templates.SUBMIT_COMMAND, "The fix is in place: I submit it.")]


# ------------------------------------------------------------------------------------------------ episode


@dataclass
class StepRecord:
    """One assistant turn (keyed by its index over ALL turns, format errors included)."""

    index: int
    response: str
    command: str | None = None  # None: no bash block (a format error)
    returncode: int | None = None
    output: str = ""
    observation: str = ""
    submit: bool = False
    timed_out: bool = False
    diff_changed: bool | None = None  # None: not tracked
    tests_ran: bool = False  # host-observed (is_test_run: the command and its exit status)
    state: str | None = None  # with track_diff: sha256 of the repository's diff after the step ("" before any)
    # with track_progress: the share of the listed tests the diff passes (the host's sealed evaluation) before/after
    progress_before: float | None = None
    progress: float | None = None

    @property
    def format_error(self) -> bool:
        return self.command is None

    def as_dict(self) -> dict:
        return {**asdict(self), "format_error": self.format_error}


@dataclass
class SweEpisode:
    instance_id: str
    turns: list[Turn] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    status: str = "completed"  # completed | truncated | failed | aborted
    exit_status: str = ""  # submitted | max_steps | context_full | engine_abort
    problem_statement: str = ""
    patch: str = ""
    patch_source: str = ""  # submitted | git_diff_fallback | none
    resolved: bool = False
    evaluation: dict | None = None

    @property
    def reward(self) -> float:
        return 1.0 if self.resolved else -1.0

    @property
    def format_errors(self) -> int:
        return sum(s.format_error for s in self.steps)


@dataclass(frozen=True)
class AgentSettings:
    max_steps: int = DEFAULT_MAX_STEPS  # upstream's step_limit
    exec_timeout_s: float = DEFAULT_EXEC_TIMEOUT_S
    track_diff: bool = False  # ask for the diff after every command (the rule judge's "progress")
    track_progress: bool = False  # and the share of the listed tests it passes (the harness's sealed look)

    @classmethod
    def from_args(cls, args, **overrides) -> AgentSettings:
        steps = getattr(args, "max_turns", None) or os.environ.get("MAX_STEPS") or DEFAULT_MAX_STEPS
        timeout = getattr(args, "tool_timeout", None) or os.environ.get("SWE_EXEC_TIMEOUT") or DEFAULT_EXEC_TIMEOUT_S
        return cls(max_steps=int(steps), exec_timeout_s=float(timeout), **overrides)


async def _diff(env, lease: str, token: str | None) -> tuple[str, float | None]:
    """The repository's diff, and with the harness token the share of the listed tests it passes."""
    arguments = {"progress": True, HARNESS_TOKEN_KEY: token} if token else {}
    reply = await env.exec_tool(lease, "diff", arguments)
    progress = reply.get("progress")
    return str(reply.get("patch", "")), float(progress) if isinstance(progress, (int, float)) else None


async def _exec(env, lease: str, command: str, timeout: float) -> tuple[int, str, bool, bool]:
    """(return code, output, timed out, the environment ended the episode: a whole-sandbox budget)."""
    try:
        reply = await env.exec_tool(lease, "bash", {"command": command, "timeout": timeout})
    except EnvServiceError as e:
        if e.status != 504:
            raise
        # the service's own limit for one call: an observation, never a repeat of the command
        return -1, timeout_message(timeout), True, False
    output = str(reply.get("observation", "")) if reply.get("episode_over") else \
        str(reply.get("output", reply.get("observation", "")))
    return int(reply.get("returncode", -1)), output, bool(reply.get("timed_out")), bool(reply.get("episode_over"))


async def run_episode(policy, env, instance_id: str, settings: AgentSettings, *, request_id: str | None = None,
                      on_step: Callable[[SweEpisode, StepRecord], Awaitable[None]] | None = None) -> SweEpisode:
    """One episode on a fresh lease of `env` (an `EnvClient`); the lease is always closed."""
    episode = SweEpisode(instance_id)
    lease = (await env.allocate(instance_id, request_id))["lease_id"]
    try:
        reset = await env.reset(lease, {"instance_id": instance_id})
        episode.problem_statement = reset.get("problem_statement") or reset.get("user_msg", "")
        messages = [templates.system_message(),
                    templates.instance_message(episode.problem_statement, reset.get("cwd") or "/testbed")]
        episode.messages = messages
        last_diff = ""
        token = reset.get(HARNESS_TOKEN_KEY) if settings.track_progress else None
        progress = (await _diff(env, lease, token))[1] if token else None  # the base tree's share
        episode.exit_status = "max_steps"
        for k in range(settings.max_steps):
            await env.heartbeat(lease)
            async with env.keep_alive(lease):
                turn = await policy.generate_turn(messages, None)
            if turn is None:
                episode.status, episode.exit_status = "truncated", "context_full"
                break
            episode.turns.append(turn)
            messages.append({"role": "assistant", "content": turn.text})
            if turn.finish_reason == "abort":  # the engine stopped (e.g. a weight update): nothing is run
                episode.status, episode.exit_status = "aborted", "engine_abort"
                break
            step = StepRecord(k, turn.text, parse_bash_block(turn.text))
            episode.steps.append(step)
            if step.command is None:
                step.observation = templates.FORMAT_ERROR
                messages.append({"role": "user", "content": step.observation})
                if on_step is not None:
                    await on_step(episode, step)
                continue
            step.returncode, step.output, step.timed_out, over = await _exec(env, lease, step.command,
                                                                             settings.exec_timeout_s)
            step.tests_ran = is_test_run(step.command, step.returncode)
            if over:  # a whole-sandbox budget: the episode is over and scored (not resolved)
                step.observation = step.output
                messages.append({"role": "user", "content": step.observation})
                episode.exit_status = "budget_exceeded"
                if on_step is not None:
                    await on_step(episode, step)
                break
            if is_submit(step.command):
                step.submit = True
                patch = submitted_patch(step.output)
                if patch:
                    episode.patch, episode.patch_source = patch, "submitted"
                episode.exit_status = "submitted"
                if on_step is not None:
                    await on_step(episode, step)
                break
            step.observation = templates.observation(step.returncode, step.output, settings.max_steps - (k + 1))
            messages.append({"role": "user", "content": step.observation})
            if settings.track_diff or token:
                diff, now = await _diff(env, lease, token)
                step.diff_changed, last_diff = diff != last_diff, diff
                step.state = hashlib.sha256(diff.encode("utf-8", "surrogateescape")).hexdigest()
                step.progress_before, step.progress, progress = progress, now, now if now is not None else progress
            if on_step is not None:
                await on_step(episode, step)
        if episode.status == "completed" and episode.exit_status == "max_steps":
            episode.status = "truncated"
        if episode.status != "aborted" and episode.exit_status == "budget_exceeded":
            # the environment ended the episode: its evaluation says why (no diff of a tree that may be full)
            episode.evaluation = await env.evaluate(lease, patch="")
            episode.resolved = False
        elif episode.status != "aborted":
            if not episode.patch:  # upstream's fallback: whatever the agent changed, submitted or not
                episode.patch = str((await env.exec_tool(lease, "diff", {})).get("patch", ""))
                episode.patch_source = "git_diff_fallback" if episode.patch.strip() else "none"
            if episode.patch.strip():
                episode.evaluation = await env.evaluate(lease, patch=episode.patch)
                episode.resolved = bool(episode.evaluation.get("resolved"))
            else:
                episode.evaluation = {"resolved": False, "reason": "no patch: the repository was not changed",
                                      "score": -1.0}
    finally:
        try:
            await env.close(lease)
        except Exception as e:  # the episode's result stands; the service's reaper frees the lease
            logger.warning("swe agent: closing lease %s failed: %r", lease, e)
    return episode


# ------------------------------------------------------------------------------------------------ samples

_STATUS = {"completed": Sample.Status.COMPLETED, "truncated": Sample.Status.TRUNCATED,
           "failed": Sample.Status.FAILED, "aborted": Sample.Status.ABORTED}


def episode_metadata(episode: SweEpisode) -> dict:
    evaluation = dict(episode.evaluation or {})
    evaluation.pop("output_tail", None)
    return {"instance_id": episode.instance_id, "num_turns": len(episode.turns), "status": episode.status,
            "exit_status": episode.exit_status, "patch_source": episode.patch_source,
            "patch_chars": len(episode.patch), "resolved": episode.resolved, "accuracy": float(episode.resolved),
            "format_errors": episode.format_errors, "evaluation": evaluation,
            # step-level signals beside the outcome (bench/swe_learning.py reports them): which files the patch
            # changes, and whether the host saw a test run
            "patch_files": sorted(set(patch_paths(episode.patch)[0])) if episode.patch.strip() else [],
            "tests_ran": any(s.tests_ran for s in episode.steps),
            "context_managed_steps": sum(bool(getattr(t, "managed", False)) for t in episode.turns)}


def step_samples(episode: SweEpisode, sample: Sample, prm_scores: list[float | None] | None = None) -> list[Sample]:
    """`--dynamic-history`: one sample per step with a response: the context ids exactly as sent to the engine and
    the ids it sampled with their log-probs. Step k's PRM score is `prm_scores[k]` (k over all steps)."""
    status = _STATUS[episode.status]
    trainable = episode.status != "aborted"
    base = {**(sample.metadata or {}), **episode_metadata(episode)}
    # a step where nothing was sampled trains nothing (upstream aborted such a child)
    return [turn_sample(sample, turn, k, {**base, "step": k, "finish_reason": turn.finish_reason,
                                          "latency_ms": round(turn.latency_ms, 1),
                                          "omitted_turns": turn.omitted_messages,
                                          "context_managed": bool(getattr(turn, "managed", False))},
                        status, trainable, prm_scores)
            for k, turn in enumerate(episode.turns) if turn.output_ids]


def trajectory_sample(episode: SweEpisode, sample: Sample, policy: SweEnginePolicy, max_context_tokens: int,
                      tokenizer=None, prm_scores: list[float | None] | None = None) -> Sample:
    """One sample for the trajectory: prompt = [system, problem]; response = every later piece (sampled ids with
    loss mask 1 and their log-probs, observations 0; a step generated from a cut context 0), cut to the context
    length (TRUNCATED when cut). `step_wise` spans are the steps' positions in the response."""
    prompt, *rest = policy.pieces
    room = max(0, max_context_tokens - len(prompt.ids))
    response, mask, logprobs, spans = [], [], [], []
    for piece in rest:
        start = len(response)
        response += piece.ids
        if piece.kind == "step":
            mask += [1 if piece.exact else 0] * len(piece.ids)
            logprobs += list(piece.logprobs or [0.0] * len(piece.ids))
            spans.append([start, len(response)])
        else:
            mask += [0] * len(piece.ids)
            logprobs += [0.0] * len(piece.ids)
    cut = len(response) > room
    if cut:
        response, mask, logprobs = response[:room], mask[:room], logprobs[:room]
        spans = [[min(a, room), min(b, room)] for a, b in spans]
    status = Sample.Status.TRUNCATED if cut and episode.status == "completed" else _STATUS[episode.status]
    sample.tokens = list(prompt.ids) + response
    sample.response_length = len(response)
    sample.response = tokenizer.decode(response) if tokenizer is not None else ""
    sample.loss_mask, sample.rollout_log_probs = mask, logprobs
    sample.status, sample.remove_sample = status, episode.status == "aborted"
    sample.metadata = {**(sample.metadata or {}), **episode_metadata(episode), "response_cut": cut,
                       "step_wise": {"step_indices": list(range(len(spans))), "step_token_spans": spans,
                                     "prm_scores": list(prm_scores) if prm_scores else None}}
    return sample


# ------------------------------------------------------------------------------------------------ trainer hooks


def instance_id_of(sample: Sample) -> str:
    """The instance a sample names: upstream's rows (`--input-key text --metadata-key metadata`: the id in
    `metadata.instance`), an `instance_id` in the metadata, or a prompt object with one."""
    meta = sample.metadata or {}
    inner = meta.get("instance") if isinstance(meta, dict) else None
    if isinstance(inner, dict) and inner.get("instance_id"):
        return str(inner["instance_id"])
    if isinstance(meta, dict) and meta.get("instance_id"):
        return str(meta["instance_id"])
    prompt = sample.prompt
    if isinstance(prompt, dict):
        prompt = prompt.get("instance", prompt)
        if isinstance(prompt, dict) and prompt.get("instance_id"):
            return str(prompt["instance_id"])
    raise ValueError("a SWE sample must name its instance: metadata.instance.instance_id (upstream's rows, "
                     "--metadata-key metadata), metadata.instance_id, or a prompt object with instance_id")


def _env_url(args) -> tuple[str, str | None]:
    """--env-server-url, else $ENV_SERVER_URL, else pool servers this process starts (`--env-workers`, the `swe`
    provider over $SWE_INSTANCES or the shipped instances)."""
    from slime.agentic.env_service.launch import rollout_service

    instances = getattr(args, "swe_instances", None) or os.environ.get(INSTANCES_ENV)
    options = {"instances": os.path.abspath(instances)} if instances else {}
    if getattr(args, "swe_backend", None):
        options["backend"] = args.swe_backend
    if getattr(args, "swe_image", None):
        options["image"] = args.swe_image
    return rollout_service(args, "swe", options, "runs/swe")


def step_judge(args):
    """`--step-judge`: `rules` (CPU), `llm` (the PRM engine, m votes; the default with one configured), or
    `module:factory`."""
    from slime.agentic.prm import judge_from_args

    from swe_prm import SweLLMJudge, SweRuleJudge

    return judge_from_args(args, rules=SweRuleJudge, llm=SweLLMJudge)


def _failed_sample(sample: Sample, tokenizer, instance_id: str, error: str) -> list[Sample]:
    return failed_sample(sample, tokenizer, error, instance_id=instance_id, exit_status="environment_error",
                         resolved=False)


async def generate(args, sample: Sample, sampling_params: dict) -> list[Sample]:
    """The custom generate hook: one episode on the sample's instance; per step or per trajectory samples."""
    from slime.agentic.env_service.client import EnvClient
    from slime.rollout.data_source import load_tokenizer
    from slime.rollout.default_rollout import get_engine_client

    tokenizer = load_tokenizer(args.hf_checkpoint)
    instance_id = instance_id_of(sample)
    max_context = int(getattr(args, "rollout_max_context_len", None) or 32768)
    policy = SweEnginePolicy(get_engine_client(args), tokenizer, sampling_params, max_context)
    seed = getattr(args, "rollout_seed", None) or getattr(args, "seed", 0) or 0
    request_id = f"{instance_id}:{seed}:{sample.group_index}:{sample.index}:{time.time_ns()}"
    judge = step_judge(args)
    judging = None
    if judge is not None:
        from swe_prm import StepJudging

        judging = StepJudging(judge, seed * 100_003 + (sample.index or 0))
    settings = AgentSettings.from_args(args, track_diff=bool(getattr(judge, "needs_diff", False)),
                                       track_progress=bool(getattr(judge, "needs_progress", False)))
    try:
        url, key = _env_url(args)
        async with EnvClient(url, key) as env:
            episode = await run_episode(policy, env, instance_id, settings, request_id=request_id,
                                        on_step=judging.on_step if judging else None)
        prm_scores = await judging.scores(len(episode.turns)) if judging else None
    except Exception as e:  # the environment or the engine failed: one FAILED sample that trains nothing
        if judging is not None:
            judging.cancel()
        logger.warning("swe agent: episode of %s failed: %r", instance_id, e)
        return _failed_sample(sample, tokenizer, instance_id, repr(e))
    if getattr(args, "dynamic_history", False):
        samples = step_samples(episode, sample, prm_scores)
        if samples:
            return samples
    elif len(policy.pieces) > 1 and any(p.ids for p in policy.pieces[1:]):
        return [trajectory_sample(episode, sample, policy, max_context, tokenizer, prm_scores)]
    # not one token sampled (the problem alone fills the context): the outcome counts for the group, nothing trains
    sample.tokens = list(policy.pieces[0].ids) if policy.pieces else []
    sample.response_length, sample.response, sample.loss_mask, sample.rollout_log_probs = 0, "", [], []
    sample.status, sample.remove_sample = Sample.Status.TRUNCATED, True
    sample.metadata = {**(sample.metadata or {}), **episode_metadata(episode)}
    return [sample]


async def reward_func(args, item: Sample | list[Sample]):
    """{"score": +1 resolved / -1 otherwise, "acc": resolved, ...} per sample; with PRM scores, each step's
    `step_wise` target is `outcome + coef * prm` (`--prm-step-coef`; an unjudged step: the outcome alone)."""
    return rewards.outcome_rewards(args, item, outcome)


def outcome(meta: dict) -> dict:
    """An episode's reward fields from its metadata: resolved by the hidden tests or not."""
    resolved = bool(meta.get("resolved", False))
    return {"score": 1.0 if resolved else -1.0, "acc": float(resolved),
            "submitted": float(meta.get("patch_source") == "submitted"),
            "format_error": float(int(meta.get("format_errors", 0)) > 0),
            "truncated": float(meta.get("status") == "truncated"),
            # the sealed evaluation saw tampering (the score is -1 already): rollout/reward/tampered
            "tampered": float(bool((meta.get("evaluation") or {}).get("tampered")))}


def add_custom_arguments(parser) -> None:
    """This setting's flags, declared here rather than by the framework's parser (upstream's `add_custom_arguments`
    hook: the trainer's parser calls it for a module its command line names), so a fork changes or adds its own."""
    g = parser.add_argument_group("SWE agent (swe-rl/generate_with_swe_remote.py)")
    g.add_argument("--swe-instances", default=None,
                   help="the instances (SWE-bench JSONL) the started pool servers serve (env SWE_INSTANCES; "
                        "default swe-rl/data/instances.jsonl)")
    g.add_argument("--swe-backend", choices=["bwrap", "docker"], default=None,
                   help="where the started pool servers run an instance: bwrap (default: the bubblewrap "
                        "sandbox) or docker (a container per episode from the instance's image; SWE-bench images "
                        "for SWE-bench rows; scripts/setup_docker.sh starts a daemon)")
    g.add_argument("--swe-image", default=None,
                   help="--swe-backend docker: swebench (SWE-bench's image names, the default for rows "
                        "of a project this repository does not ship), swe-gym (SWE-Gym's), or an image template "
                        "({instance_id}); an instance's own image_name always wins; the shipped instances default "
                        "to slime-terminal-base with the repository copied in")
