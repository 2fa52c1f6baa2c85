"""The terminal agent's turn loop (upstream's, without CAMEL): messages kept directly, one model turn at a time,
tool calls executed through the environment service, one training sample per turn.

    --extra-python-path terminal-rl
    --custom-generate-function-path generate.generate --custom-rm-path generate.reward_func

This folder's method (upstream's terminal-rl/generate.py plays the same role), built on the shared primitives of
`slime.agentic.agent_loop` (parsing, context fitting, turns, policies): a fork edits this file.

Per episode: allocate a lease (`request_id = "{task_key}:{seed}:{group_index}:{index}"`, so a retried allocate is
recognised), reset it (the task's instruction and the tool schemas come back), then per turn:

1. render the messages with the policy's chat template and the tools (`render_prompt_ids`); if they do not fit
   `max_input_tokens`, drop whole turns from the middle (the system prompt and the task stay, the latest turns
   stay, a one-line note says how many messages were left out): a cut at message granularity, never inside a
   special token as upstream's raw token cut was;
2. generate (exact ids and log-probs of what was sampled);
3. parse Qwen-style tool calls (`<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`, several per turn
   allowed) strictly: a block whose JSON does not parse, or that lacks a string name or an object of arguments, is
   a *parse error*: the model sees a `json_parse_error` observation saying what was wrong;
4. run the calls one after another (`heartbeat` + `exec_tool`); each result is a `tool` message.

The episode ends when a turn has neither tool calls nor parse errors (the final answer), after `max_parse_errors`
parse errors in all (FAILED), after `max_steps` turns (`MAX_STEPS`, TRUNCATED), when the context cannot hold the
task and the last turn (TRUNCATED), with an empty final message (FAILED: upstream's ABORTED would take the task's
whole group out of the batch here), or when the engine aborts the turn (ABORTED). The task's tests run unless the
episode FAILED or was ABORTED (a truncated episode is still tested); reward = 2 * passed / total - 1 (upstream's), or
with `--terminal-reward solved` Terminal-Bench's own (+1 when every test passed, else -1).
FAILED and ABORTED episodes keep their reward for the group's statistics but their samples train nothing
(`remove_sample`), as upstream.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from slime.agentic import rewards
from slime.agentic.agent_loop import (
    PARSE_ERROR_NAME,
    EngineTurnPolicy,
    Turn,
    TurnPolicy,
    failed_sample,
    parse_error_observation,
    parse_tool_calls,
    turn_sample,
)
from slime.agentic.env_service.client import EnvServiceError
from slime.agentic.env_service.providers import HARNESS_TOKEN_KEY, PROGRESS_TOOL
from slime.utils.types import Sample

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You are an expert Linux engineer working in a terminal. You solve the user's task by calling the shell tools; "
    "every command runs in your working directory /app unless you change it. Look before you act (ls, cat), make "
    "one step at a time, and check your result. Write longer scripts to a file with shell_write_content_to_file, "
    "then run them. When the task is done, answer with a short summary and no tool call."
)
# with the lean tool profile (--terminal-tools lean: shell_exec with a command only)
LEAN_SYSTEM_PROMPT = (
    "You are an expert Linux engineer working in a terminal. Solve the user's task by calling shell_exec; commands "
    "run in /app. When the task is done, answer with a short summary and no tool call."
)
DEFAULT_MAX_STEPS = 10
DEFAULT_MAX_PARSE_ERRORS = 3


# ------------------------------------------------------------------------------------------------ episode


@dataclass
class Episode:
    task_key: str
    turns: list[Turn] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    status: str = "completed"  # completed | truncated | failed | aborted
    stop_reason: str = ""
    parse_errors: int = 0
    tool_calls: int = 0
    accuracy: float = 0.0
    evaluation: dict | None = None
    error: str | None = None
    # with `track_progress`: the harness's look at the state before the first turn and after each turn
    # ({"fingerprint", "progress"}: the provider's `progress` tool, facts the host observed)
    states: list[dict] = field(default_factory=list)

    @property
    def reward(self) -> float:
        return 2.0 * self.accuracy - 1.0


@dataclass(frozen=True)
class AgentSettings:
    max_steps: int = DEFAULT_MAX_STEPS  # MAX_STEPS: model turns per episode
    max_parse_errors: int = DEFAULT_MAX_PARSE_ERRORS
    system_prompt: str = SYSTEM_PROMPT

    @classmethod
    def from_args(cls, args) -> AgentSettings:
        return cls(max_steps=int(getattr(args, "max_turns", None) or os.environ.get("MAX_STEPS") or DEFAULT_MAX_STEPS),
                   max_parse_errors=int(getattr(args, "max_parse_errors", None) or DEFAULT_MAX_PARSE_ERRORS),
                   system_prompt=system_prompt_for(getattr(args, "terminal_tools", None) or "upstream"))


def system_prompt_for(tools: str) -> str:
    """The system prompt that goes with a tool profile (the upstream one names its four tools)."""
    return LEAN_SYSTEM_PROMPT if tools == "lean" else SYSTEM_PROMPT


async def _state(env, lease: str, token: str | None) -> dict:
    """The provider's `progress` tool (the harness's, with the lease's token): {"fingerprint", "progress"}."""
    if not token:
        return {"fingerprint": None, "progress": None}
    got = await env.exec_tool(lease, PROGRESS_TOOL, {HARNESS_TOKEN_KEY: token})
    return {"fingerprint": got.get("fingerprint"), "progress": got.get("progress")}


async def run_episode(policy: TurnPolicy, env, task_key: str, task_meta: dict, settings: AgentSettings, *,
                      request_id: str | None = None, on_turn: Callable[..., Awaitable[None]] | None = None,
                      track_progress: bool = False) -> Episode:
    """One episode on a fresh lease of `env` (an `EnvClient`); the lease is always closed. `track_progress`: the
    state is looked at before the first turn and after each turn (`Episode.states`, for the rule step judge)."""
    episode = Episode(task_key)
    lease = (await env.allocate(task_key, request_id))["lease_id"]
    try:
        reset = await env.reset(lease, task_meta)
        tools = reset.get("tool_schemas") or []
        token = reset.get(HARNESS_TOKEN_KEY) if track_progress else None
        if track_progress:
            episode.states.append(await _state(env, lease, token))
        messages = [{"role": "system", "content": settings.system_prompt},
                    {"role": "user", "content": reset.get("user_msg", "")}]
        while True:
            if len(episode.turns) >= settings.max_steps:
                episode.status, episode.stop_reason = "truncated", "max_steps"
                break
            async with env.keep_alive(lease):
                turn = await policy.generate_turn(messages, tools)
            if turn is None:
                episode.status, episode.stop_reason = "truncated", "context_full"
                break
            episode.turns.append(turn)
            parsed = parse_tool_calls(turn.text)
            messages.append({"role": "assistant", "content": turn.text})
            results = []
            over = False
            for call in parsed.calls:
                await env.heartbeat(lease)
                try:
                    reply = await env.exec_tool(lease, call.name, call.arguments)
                    observation = str(reply.get("observation", ""))
                    over = bool(reply.get("episode_over"))
                except EnvServiceError as e:
                    if e.status != 504:
                        raise
                    # the environment's time limit for one call: an observation, never a repeat of the command
                    observation = f"[TOOL_ERROR] {call.name}: no answer within the environment's time limit ({e.message})"
                episode.tool_calls += 1
                results.append((call, observation))
                messages.append({"role": "tool", "name": call.name, "content": results[-1][1]})
                if over:  # the environment ended the episode (a whole-sandbox budget): the rest is not run
                    break
            for reason in parsed.errors:
                episode.parse_errors += 1
                messages.append({"role": "tool", "name": PARSE_ERROR_NAME, "content": parse_error_observation(reason)})
            if track_progress and not over:
                episode.states.append(await _state(env, lease, token))
            if on_turn is not None:
                await on_turn(episode, turn, parsed, results)
            if over:
                episode.status, episode.stop_reason = "completed", "budget_exceeded"
                break
            if turn.finish_reason == "abort":
                episode.status, episode.stop_reason = "aborted", "engine_abort"
                break
            if episode.parse_errors >= settings.max_parse_errors:
                episode.status, episode.stop_reason = "failed", "parse_errors"
                break
            if not parsed.calls and not parsed.errors:
                if not turn.text.strip():
                    # upstream's ABORTED; here FAILED: an aborted sample takes its whole group out of the batch
                    # (it means "the engine stopped", e.g. for a weight update), while this episode's outcome
                    # still counts for the group and only its own turns are not trained
                    episode.status, episode.stop_reason = "failed", "empty_final_message"
                else:
                    episode.status, episode.stop_reason = "completed", "final_answer"
                break
        if episode.status not in ("failed", "aborted"):
            episode.evaluation = await env.evaluate(lease)
            episode.accuracy = float(episode.evaluation.get("accuracy", episode.evaluation.get("score", 0.0)))
        episode.messages = messages
    finally:
        try:
            await env.close(lease)
        except Exception as e:  # the episode's result stands; the service's reaper frees the lease
            logger.warning("terminal agent: closing lease %s failed: %r", lease, e)
    return episode


# ------------------------------------------------------------------------------------------------ samples


def task_of(sample: Sample) -> tuple[str, dict]:
    """(task_key, task_meta) from a sample whose prompt is upstream's `task` object (`--input-key task`)."""
    prompt = sample.prompt
    if isinstance(prompt, str):
        try:
            prompt = json.loads(prompt)
        except ValueError:
            raise ValueError(f"a terminal sample's prompt must be a task object, got text {prompt[:80]!r}") from None
    if isinstance(prompt, dict) and "task" in prompt and isinstance(prompt["task"], dict):
        prompt = prompt["task"]
    if not isinstance(prompt, dict) or not prompt.get("task_name"):
        raise ValueError("a terminal sample's prompt must be an object with task_name (and task_path, instruction)")
    return f"{prompt['task_name']}:{prompt.get('task_path', '')}", dict(prompt)


_STATUS = {"completed": Sample.Status.COMPLETED, "truncated": Sample.Status.TRUNCATED,
           "failed": Sample.Status.FAILED, "aborted": Sample.Status.ABORTED}


def episode_samples(episode: Episode, sample: Sample, prm_scores: list[float | None] | None = None) -> list[Sample]:
    """One sample per model turn: the prompt ids exactly as sent plus the generated ids and their log-probs (and
    the turn's PRM score, when a step judge scored it)."""
    status = _STATUS[episode.status]
    trainable = episode.status not in ("failed", "aborted")
    base = {"task_key": episode.task_key, "num_turns": len(episode.turns), "status": episode.status,
            "stop_reason": episode.stop_reason, "parse_error_count": episode.parse_errors,
            "tool_calls": episode.tool_calls, "accuracy": episode.accuracy, "evaluation": episode.evaluation}
    return [turn_sample(sample, turn, k, {**(sample.metadata or {}), **base, "turn_idx": k,
                                          "finish_reason": turn.finish_reason, "latency_ms": round(turn.latency_ms, 1),
                                          "omitted_messages": turn.omitted_messages},
                        status, trainable, prm_scores)
            for k, turn in enumerate(episode.turns)]


# ------------------------------------------------------------------------------------------------ trainer hooks


def service_options(args) -> dict:
    """The terminal provider's options for the pool servers the trainer starts: --terminal-tasks-dir,
    --terminal-backend, --terminal-image, --terminal-tools, --terminal-build-images (those given)."""
    names = {"terminal_tasks_dir": "tasks_dir", "terminal_backend": "backend", "terminal_image": "image",
             "terminal_tools": "tools", "terminal_build_images": "build_images"}
    return {option: getattr(args, flag) for flag, option in names.items() if getattr(args, flag, None)}


def _env_url(args) -> tuple[str, str | None]:
    """The environment service's URL: --env-server-url, else $ENV_SERVER_URL, else pool servers this process
    starts itself (`--env-workers`, the terminal provider over --terminal-tasks-dir)."""
    from slime.agentic.env_service.launch import rollout_service

    return rollout_service(args, "terminal", service_options(args), "runs/terminal")


def _client(args):
    """A client for one episode (closed by the caller): an httpx client is bound to the event loop it first ran
    in, and each rollout runs its own loop, whose id a later loop may reuse."""
    from slime.agentic.env_service.client import EnvClient

    url, key = _env_url(args)
    return EnvClient(url, key)


def step_judge(args):
    """The per-turn PRM of `--step-judge`: `rules` (the CPU rule judge), `llm` (the PRM engine with upstream's
    terminal judge input; the default when a PRM engine is configured), `module:factory`, or none."""
    from slime.agentic.prm import judge_from_args

    from terminal_prm import TerminalLLMJudge, TerminalRuleJudge

    return judge_from_args(args, rules=TerminalRuleJudge, llm=TerminalLLMJudge)


async def generate(args, sample: Sample, sampling_params: dict) -> list[Sample]:
    """The custom generate hook: one episode for the task in `sample.prompt`, one sample per model turn."""
    from slime.rollout.data_source import load_tokenizer
    from slime.rollout.default_rollout import get_engine_client

    tokenizer = load_tokenizer(args.hf_checkpoint)
    task_key, task_meta = task_of(sample)
    policy = EngineTurnPolicy(get_engine_client(args), tokenizer, sampling_params,
                              getattr(args, "rollout_max_context_len", None) or 32768)
    seed = getattr(args, "rollout_seed", None) or getattr(args, "seed", 0) or 0
    request_id = f"{task_key}:{seed}:{sample.group_index}:{sample.index}:{time.time_ns()}"
    judge = step_judge(args)
    judging = None
    if judge is not None:
        from terminal_prm import TurnJudging

        judging = TurnJudging(judge, str(task_meta.get("instruction", "")), seed * 100_003 + (sample.index or 0))
    try:
        async with _client(args) as env:
            episode = await run_episode(policy, env, task_key, task_meta, AgentSettings.from_args(args),
                                        request_id=request_id, on_turn=judging.on_turn if judging else None,
                                        track_progress=bool(getattr(judge, "needs_progress", False)))
        prm_scores = await judging.scores() if judging else None
    except Exception as e:  # the environment failed: one FAILED sample that trains nothing, the batch goes on
        if judging is not None:
            judging.cancel()
        logger.warning("terminal agent: episode of %s failed: %r", task_key, e)
        return failed_sample(sample, tokenizer, repr(e), task_key=task_key, stop_reason="environment_error")
    samples = episode_samples(episode, sample, prm_scores)
    if not samples:  # not even one turn fitted: nothing to train, the outcome still counts for the group
        sample.tokens, sample.response_length, sample.response = [], 0, ""
        sample.loss_mask, sample.rollout_log_probs = [], []
        sample.status, sample.remove_sample = Sample.Status.TRUNCATED, True
        sample.metadata = {**(sample.metadata or {}), "task_key": task_key, "status": episode.status,
                           "stop_reason": episode.stop_reason, "accuracy": episode.accuracy}
        return [sample]
    return samples


REWARD_MODES = ("pass-rate", "solved")


async def reward_func(args, item: Sample | list[Sample]):
    """{"score": ..., "acc": accuracy, ...} per sample (every turn of an episode gets its outcome; a judged turn also
    its step_wise target). The score is `--terminal-reward`'s."""
    mode = getattr(args, "terminal_reward", None) or "pass-rate"
    return rewards.outcome_rewards(args, item, functools.partial(outcome, mode=mode))


def outcome(meta: dict, mode: str = "pass-rate") -> dict:
    """An episode's reward fields from its metadata. Both semantics are always reported: `pass_rate_score` is
    upstream OpenClaw-RL's `2 * passed / total - 1`, `solved` Terminal-Bench's own (every test passed); `score`, what
    trains, is the first with mode "pass-rate" and +1 / -1 on `solved` with mode "solved"."""
    if mode not in REWARD_MODES:
        raise ValueError(f"terminal reward mode {mode!r}: expected one of {REWARD_MODES}")
    accuracy = float(meta.get("accuracy", 0.0))
    solved = accuracy >= 1.0
    pass_rate_score = 2.0 * accuracy - 1.0
    return {"score": pass_rate_score if mode == "pass-rate" else (1.0 if solved else -1.0),
            "acc": accuracy, "solved": float(solved), "pass_rate_score": pass_rate_score,
            "parse_error": float(int(meta.get("parse_error_count", 0)) > 0),
            "truncated": float(meta.get("status") == "truncated"),
            # the sealed evaluation saw tampering (accuracy 0, score -1 already): rollout/reward/tampered
            "tampered": float(bool((meta.get("evaluation") or {}).get("tampered")))}


def add_custom_arguments(parser) -> None:
    """This setting's flags, declared here rather than by the framework's parser (upstream's `add_custom_arguments`
    hook: the trainer's parser calls it for a module its command line names), so a fork changes or adds its own."""
    g = parser.add_argument_group("terminal agent (terminal-rl/generate.py)")
    g.add_argument("--terminal-tasks-dir", default=None,
                   help="the task folders (terminal-bench layout) the started pool servers serve")
    g.add_argument("--terminal-backend", choices=["bwrap", "docker"], default=None,
                   help="where the started pool servers run a task: bwrap (default: the bubblewrap "
                        "sandbox) or docker (a container per episode; scripts/setup_docker.sh starts a daemon)")
    g.add_argument("--terminal-image", default=None,
                   help="--terminal-backend docker: the image ({task} is the task's name, e.g. "
                        "tb__{task} for per-task terminal-bench images); default slime-terminal-base")
    g.add_argument("--terminal-build-images", action="store_true", default=None,
                   help="--terminal-backend docker: run each task that has a Dockerfile in the image built from it "
                        "(cached by content; stand-ins for base images that cannot be pulled; offline test runners), "
                        "as root in its WORKDIR, as Terminal-Bench does (a downloaded Terminal-Bench dataset)")
    g.add_argument("--terminal-reward", choices=list(REWARD_MODES), default="pass-rate",
                   help="what trains: pass-rate (upstream OpenClaw-RL's 2 * passed / total - 1, the default) or solved "
                        "(Terminal-Bench's own: +1 when every test passed, else -1); both are logged "
                        "(rollout/reward/pass_rate_score, rollout/reward/solved)")
    g.add_argument("--terminal-tools", choices=["upstream", "lean"], default=None,
                   help="the tools the started pool servers declare and the system prompt: upstream "
                        "(default: the four shell tools) or lean (shell_exec with a command only: 226 prompt tokens of "
                        "system prompt and tools instead of 913; a ~3x cheaper training step on CPU)")
