"""The GUI agent loop (upstream's `generate_with_gui` and its Qwen3-VL agent): this folder's method.

    --extra-python-path gui-rl
    --custom-generate-function-path generate_with_gui.generate --custom-rm-path generate_with_gui.reward_func

The screen is given as a screenshot
(``observation="screenshot"``, a vision-language policy: :class:`slime.agentic.vision_policy.VisionTurnPolicy`) or
as its OCR text view (``"text"``: each text line with its position in the 0-999 coordinates the policy clicks with).

Per step the messages are rebuilt as upstream builds them: the system prompt (the `computer_use` tool and the
response format: one ``Action:`` line, then exactly one ``<tool_call>``), the last ``history - 1`` steps as (user:
that step's screen, assistant: that step's whole response), then the current screen with the instruction and every
earlier step's ``Action:`` line; so a screenshot policy sees the last ``history`` screenshots. One sample per step
with the exact prompt ids the engine saw, its sampled ids and log-probs (``--dynamic-history``;
:func:`slime.agentic.agent_loop.turn_sample`) and, for a screenshot policy, the step's screenshots in the order
of their image pads (``Sample.multimodal_inputs``: the trainer scores exactly what the engine saw).

The episode ends when the agent terminates (``DONE`` / ``FAIL``), after ``max_steps`` (truncated: upstream then sent
FAIL, which solved every infeasible task by running out of steps; here nothing is sent and the evaluator sees a cut
off episode), or after ``max_parse_errors`` responses without a valid action (failed: unparsable, or a call the
environment refuses, e.g. an unknown action; each one is shown to the agent as an error). Reward: +1 when the evaluator's score is 1, else -1.

Step rewards (``--step-judge rules``, :class:`GuiRuleJudge`): +1 for an action that ran and changed what the screen
shows (or a terminate/wait), -1 for a parse error, an action error or an action that changed nothing on screen
(the OCR text view: the pool servers send it to the judge also for a screenshot policy).
``--step-judge llm``: the PRM engine's votes on the step with the screen before and after it: the two screenshots in
the judge's request (:class:`GuiVLMJudge`, upstream's; a vision-language PRM) for a screenshot policy, the two text
views (:class:`GuiLLMJudge`) for a text policy.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from dataclasses import dataclass, field

from slime.agentic import rewards
from slime.agentic.env_service.client import EnvServiceError
from slime.agentic.prm import PendingJudgements
from slime.agentic.agent_loop import EngineTurnPolicy, Turn, failed_sample, tool_call_text, turn_sample
from slime.utils.types import Sample

from slime.agentic.gui.actions import ACTION_FAILED, REFUSED, TOOL_PROFILES, ActionError, parse_response
from slime.agentic.gui.observation import downscale_png

logger = logging.getLogger(__name__)

DEFAULT_MAX_STEPS = 15  # upstream's GUI_MAX_STEPS
DEFAULT_HISTORY = 3  # upstream's max_image_history_length: the current screen and 2 earlier steps
DEFAULT_MAX_PARSE_ERRORS = 3
OBSERVATIONS = ("text", "screenshot")
SYSTEM_PROMPT = (
    "You are a computer-use agent. You operate a Linux desktop with a mouse and keyboard through the computer_use "
    "tool to complete the user's instruction. You see the screen as text: each line is `text [x, y]`: a line of text "
    "and its centre on the screen in coordinates from 0 to 999 (the screen is 1000x1000 in these units).\n\n"
    "Answer with exactly one line `Action: <what you do, in a few words>` and then exactly one tool call:\n"
    "<tool_call>\n{\"name\": \"computer_use\", \"arguments\": {\"action\": \"left_click\", \"coordinate\": [x, y]}}\n"
    "</tool_call>\n"
    "Nothing else. When the task is complete, call terminate with status success; when it cannot be done, call "
    "terminate with status failure.")
SCREENSHOT_SYSTEM_PROMPT = (
    "You are a computer-use agent. You operate a Linux desktop with a mouse and keyboard through the computer_use "
    "tool to complete the user's instruction. You see screenshots of the screen; coordinates go from 0 to 999 "
    "across the screenshot's width and height, whatever its size in pixels.\n\n"
    "Answer with exactly one line `Action: <what you do, in a few words>` and then exactly one tool call:\n"
    "<tool_call>\n{\"name\": \"computer_use\", \"arguments\": {\"action\": \"left_click\", \"coordinate\": [x, y]}}\n"
    "</tool_call>\n"
    "Nothing else. When the task is complete, call terminate with status success; when it cannot be done, call "
    "terminate with status failure.")
LEAN_SYSTEM_PROMPT = (  # the chat template's tool section shows the call format: no example here
    "You operate a Linux desktop through the computer_use tool. The screen is given as lines `text [x, y]`: a "
    "text and where it is, from 0 to 999. Answer with one line `Action: <what you do>`, then one tool call. When the "
    "task is done, call terminate with status success.")
STEP_PROMPT = ("Please generate the next move according to the screen, the instruction and the previous actions.\n\n"
               "Instruction: {instruction}\n\nPrevious actions:\n{previous}")


def screen_message(observation: dict, note: str = "") -> str:
    view = observation.get("text_view") or "(no text on the screen)"
    return (f"{note}\n" if note else "") + f"Screen text:\n{view}"


def screen_content(observation: dict, settings: "AgentSettings", note: str = "", text: str = "") -> str | list[dict]:
    """A user message's content for one screen: its text view, or its screenshot (an image part); then `note` (an
    error of the last response) and `text`."""
    if settings.observation == "text":
        return screen_message(observation, note) + (f"\n\n{text}" if text else "")
    from slime.agentic.vision_policy import image_part

    image = observation.get("screenshot_b64")
    if not image:
        raise ValueError("a screenshot policy needs screenshots: the gui provider's observation must be screenshot "
                         "or both")
    words = "\n".join(part for part in (note, text) if part)
    return [image_part(image)] + ([{"type": "text", "text": words}] if words else [])


@dataclass
class GuiStep:
    turn: Turn
    action_line: str = ""
    arguments: dict | None = None
    error: str = ""  # a parse or action error, shown to the agent
    screen_before: str = ""  # the text views
    screen_after: str = ""
    image_before: str = ""  # the screenshots (base64 PNG) a screenshot policy and its judge see
    image_after: str = ""
    special: str | None = None


@dataclass
class GuiEpisode:
    task_key: str
    steps: list[GuiStep] = field(default_factory=list)
    status: str = "completed"  # completed | truncated | failed | aborted
    stop_reason: str = ""
    parse_errors: int = 0
    accuracy: float = 0.0
    evaluation: dict | None = None

    @property
    def reward(self) -> float:
        return 1.0 if self.accuracy == 1.0 else -1.0


@dataclass(frozen=True)
class AgentSettings:
    max_steps: int = DEFAULT_MAX_STEPS
    history: int = DEFAULT_HISTORY
    max_parse_errors: int = DEFAULT_MAX_PARSE_ERRORS
    observation: str = "text"  # or "screenshot" (a vision-language policy)
    screenshot_max_pixels: int | None = None  # screenshots are scaled down to this many pixels (None: as sent)
    system_prompt: str = ""  # "": the observation's own (SYSTEM_PROMPT / SCREENSHOT_SYSTEM_PROMPT / LEAN_SYSTEM_PROMPT)
    # the tool profile: upstream's computer_use schema, or `lean` (a text policy's short prompt and schema: 316 prompt
    # tokens of system prompt and tool instead of 629 on Qwen2.5-Coder, the same calls)
    tools: str = "upstream"

    def __post_init__(self):
        if self.history < 1:
            raise ValueError(f"history counts the current screen: at least 1, got {self.history}")
        if self.observation not in OBSERVATIONS:
            raise ValueError(f"observation must be one of {', '.join(OBSERVATIONS)}, got {self.observation!r}")
        if self.tools not in TOOL_PROFILES:
            raise ValueError(f"tools must be one of {', '.join(TOOL_PROFILES)}, got {self.tools!r}")
        if self.tools == "lean" and self.observation != "text":
            raise ValueError("the lean tool profile is for a text policy (--gui-observation text)")

    @property
    def prompt(self) -> str:
        if self.system_prompt:
            return self.system_prompt
        if self.observation == "screenshot":
            return SCREENSHOT_SYSTEM_PROMPT
        return LEAN_SYSTEM_PROMPT if self.tools == "lean" else SYSTEM_PROMPT

    @property
    def tool_schemas(self) -> list[dict]:
        return [TOOL_PROFILES[self.tools]]

    @classmethod
    def from_args(cls, args, evaluation: bool = False) -> AgentSettings:
        pixels = getattr(args, "gui_screenshot_max_pixels", None) or os.environ.get("GUI_SCREENSHOT_MAX_PIXELS")
        steps = (getattr(args, "gui_eval_max_steps", None) if evaluation else None) \
            or getattr(args, "gui_max_steps", None) or getattr(args, "max_turns", None)
        return cls(max_steps=int(steps or os.environ.get("GUI_MAX_STEPS") or DEFAULT_MAX_STEPS),
                   history=int(getattr(args, "gui_history", None) or os.environ.get("GUI_HISTORY") or DEFAULT_HISTORY),
                   tools=getattr(args, "gui_tools", None) or os.environ.get("GUI_TOOLS") or "upstream",
                   max_parse_errors=int(getattr(args, "max_parse_errors", None) or DEFAULT_MAX_PARSE_ERRORS),
                   observation=getattr(args, "gui_observation", None) or os.environ.get("GUI_OBSERVATION") or "text",
                   screenshot_max_pixels=int(pixels) if pixels else None)


def build_messages(instruction: str, steps: list[GuiStep], observation: dict, settings: AgentSettings) -> list[dict]:
    """Upstream's per-step messages (module docstring), with screens as text or screenshots."""
    messages = [{"role": "system", "content": settings.prompt}]
    for step in steps[len(steps) - (settings.history - 1):] if settings.history > 1 else []:
        seen = {"text_view": step.screen_before, "screenshot_b64": step.image_before}
        messages.append({"role": "user", "content": screen_content(seen, settings)})
        messages.append({"role": "assistant", "content": step.turn.text})
    previous = "\n".join(f"Step {i + 1}: {s.action_line or '(no valid action)'}" for i, s in enumerate(steps))
    note = f"Your last response could not be run: {steps[-1].error}" if steps and steps[-1].error else ""
    messages.append({"role": "user", "content": screen_content(observation, settings, note, STEP_PROMPT.format(
        instruction=instruction, previous=previous or "None"))})
    return messages


async def run_episode(policy, env, task_key: str, settings: AgentSettings, *, request_id: str | None = None,
                      on_step=None) -> GuiEpisode:
    """One episode of `task_key` on a fresh lease of `env` (an EnvClient of a `gui` service); the lease is always
    closed. `on_step(episode, step)` is awaited after each step (the step judge)."""
    episode = GuiEpisode(task_key)
    lease = (await env.allocate(task_key, request_id))["lease_id"]
    try:
        observation = _scaled(await env.reset(lease, {"task": task_key}), settings)
        instruction = observation.get("instruction", "")
        while True:
            if len(episode.steps) >= settings.max_steps:
                episode.status, episode.stop_reason = "truncated", "max_steps"
                break
            messages = build_messages(instruction, episode.steps, observation, settings)
            async with env.keep_alive(lease):
                turn = await policy.generate_turn(messages, settings.tool_schemas)
            if turn is None:
                episode.status, episode.stop_reason = "truncated", "context_full"
                break
            step = GuiStep(turn, screen_before=observation.get("text_view", ""),
                           image_before=observation.get("screenshot_b64", ""))
            episode.steps.append(step)
            if turn.finish_reason == "abort":
                episode.status, episode.stop_reason = "aborted", "engine_abort"
                break
            try:
                step.action_line, step.arguments = parse_response(turn.text)
            except ActionError as e:
                step.error = str(e)
                episode.parse_errors += 1
            if step.arguments is not None:
                await env.heartbeat(lease)
                try:
                    reply = await env.exec_tool(lease, "computer_use", step.arguments)
                except EnvServiceError as e:
                    if e.status != 504:
                        raise
                    reply = {"observation": "[ACTION_ERROR] no answer within the environment's time limit",
                             "error": True, "error_code": ACTION_FAILED}
                if reply.get("error"):
                    step.error = str(reply.get("observation", ""))
                    if reply.get("error_code") == REFUSED:  # a call the environment cannot run: no valid action
                        episode.parse_errors += 1
                if reply.get("done"):
                    step.special = reply.get("status")
                else:
                    observation = {**observation, **_scaled({k: v for k, v in reply.items()
                                                             if k in ("text_view", "screen", "screenshot_b64")},
                                                            settings)}
            step.screen_after = observation.get("text_view", "")
            step.image_after = observation.get("screenshot_b64", "")
            if on_step is not None:
                await on_step(episode, step)
            if step.special:
                episode.status = "completed"
                episode.stop_reason = {"DONE": "done", "BUDGET": "budget_exceeded"}.get(step.special, "agent_failure")
                break
            if episode.parse_errors >= settings.max_parse_errors:
                episode.status, episode.stop_reason = "failed", "parse_errors"
                break
        if episode.status != "aborted":
            episode.evaluation = await env.evaluate(lease)
            episode.accuracy = float(episode.evaluation.get("acc", 0.0))
    finally:
        try:
            await env.close(lease)
        except Exception as e:  # the result stands; the service's reaper frees the lease
            logger.warning("gui agent: closing lease %s failed: %r", lease, e)
    return episode


def _scaled(observation: dict, settings: AgentSettings) -> dict:
    """The observation with its screenshot scaled to the setting's size (only a screenshot policy keeps one)."""
    if settings.observation != "screenshot":
        return {k: v for k, v in observation.items() if k != "screenshot_b64"}
    if observation.get("screenshot_b64"):
        observation = {**observation,
                       "screenshot_b64": downscale_png(observation["screenshot_b64"], settings.screenshot_max_pixels)}
    return observation


# ------------------------------------------------------------------------------------------------ step rewards


class GuiRuleJudge:
    """The CPU step judge (module docstring). Deterministic; a `--step-judge module:factory` factory too."""

    def __init__(self, args=None):
        self.stats = {"steps": 0}

    async def score_step(self, step: GuiStep, *, instruction: str = "", step_index: int = 0, seed: int = 0) -> float:
        self.stats["steps"] += 1
        if step.error or step.arguments is None or step.special == "BUDGET":  # (BUDGET: the desktop went over one)
            return -1.0
        if step.special or step.arguments.get("action") == "wait":
            return 1.0
        return 1.0 if step.screen_after != step.screen_before else -1.0


class GuiLLMJudge:
    """The LLM step judge on text: the PRM engine's m votes (`slime.agentic.prm.StepJudge`) on the step's response
    with the screen's text before it as history and after it as the observation. (Upstream's judge sees the two
    screenshots; that needs the VLM path.) A failed call or a reply without a vote leaves the step unjudged."""

    def __init__(self, step_judge):
        self.step_judge = step_judge

    async def score_step(self, step: GuiStep, *, instruction: str = "", step_index: int = 0,
                         seed: int = 0) -> float | None:
        after = step.error or step.screen_after
        return await self.step_judge.score(instruction, f"Screen text before the step:\n{step.screen_before}",
                                           step.turn.text, f"Screen text after the step:\n{after}",
                                           step_index=step_index, seed=seed)


def data_url(image_b64: str) -> dict:
    """An OpenAI chat `image_url` part of a base64 PNG (the judge's request carries the screenshots themselves)."""
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image_b64}"}}


def vlm_judge_messages(instruction: str, step: GuiStep, step_index: int) -> list[dict]:
    """The PRM's chat messages for one step as upstream's GUI judge frames it: the instruction, the screenshot before
    the action, the agent's response, the screenshot after it (the same screen when nothing ran, with the error)."""
    from slime.agentic.prm import SYSTEM

    after_words = (f"The action could not be run: {step.error[:500]}\nScreenshot after it (unchanged):"
                   if step.error else "Screenshot after the action:")
    content = [
        {"type": "text", "text": f"Problem:\n{instruction[:3000]}\n\nStep index: {step_index}\n\n"
                                 "Screenshot before the action:"},
        data_url(step.image_before),
        {"type": "text", "text": f"Current action:\n{step.turn.text[:3000]}\n\n{after_words}"},
        data_url(step.image_after or step.image_before),
        {"type": "text", "text": "Judge only the current action. Do NOT continue the trajectory. "
                                 "Answer with \\boxed{1} or \\boxed{-1}."},
    ]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": content}]


class GuiVLMJudge:
    """Upstream's GUI step judge: the PRM engine (a vision-language model) votes m times on the step with the
    screenshots before and after it, sent in the request (in memory: no files on disk). A failed call or a reply
    without a vote leaves the step unjudged."""

    def __init__(self, step_judge):
        self.step_judge = step_judge

    async def score_step(self, step: GuiStep, *, instruction: str = "", step_index: int = 0,
                         seed: int = 0) -> float | None:
        if not step.image_before:
            raise ValueError("the VLM step judge needs the step's screenshots (a screenshot policy's episode)")
        return await self.step_judge.score_messages(vlm_judge_messages(instruction, step, step_index),
                                                    step_index=step_index, seed=seed)


class StepJudging(PendingJudgements):
    """Starts one judgement per step as the episode goes and collects them after (in step order)."""

    def __init__(self, judge, instruction: str = "", seed: int = 0):
        super().__init__()
        self.judge, self.instruction, self.seed = judge, instruction, seed

    async def on_step(self, episode: GuiEpisode, step: GuiStep) -> None:
        index = len(self.tasks)
        self.start(index, self.judge.score_step(step, instruction=self.instruction, step_index=index, seed=self.seed))


# ------------------------------------------------------------------------------------------------ samples


_STATUS = {"completed": Sample.Status.COMPLETED, "truncated": Sample.Status.TRUNCATED,
           "failed": Sample.Status.FAILED, "aborted": Sample.Status.ABORTED}


def episode_samples(episode: GuiEpisode, sample: Sample, prm_scores: list[float | None] | None = None) -> list[Sample]:
    """One sample per step (the exact prompt ids and the sampled ids with log-probs); an aborted episode trains
    nothing. Failed episodes (parse errors) are trained: their -1 is the signal against malformed actions."""
    status = _STATUS[episode.status]
    trainable = episode.status != "aborted"
    base = {"task_key": episode.task_key, "num_steps": len(episode.steps), "status": episode.status,
            "stop_reason": episode.stop_reason, "parse_error_count": episode.parse_errors,
            "accuracy": episode.accuracy, "evaluation": episode.evaluation}
    return [turn_sample(sample, step.turn, k, {**(sample.metadata or {}), **base, "turn_idx": k,
                                               "action": step.action_line, "step_error": step.error[:300],
                                               "finish_reason": step.turn.finish_reason},
                        status, trainable, prm_scores)
            for k, step in enumerate(episode.steps)]


def task_of(sample: Sample) -> str:
    """The task key (``domain/id``) of a training row: the prompt itself, or metadata {domain, example_id}."""
    meta = sample.metadata or {}
    if meta.get("domain") and meta.get("example_id"):
        return f"{meta['domain']}/{meta['example_id']}"
    if isinstance(sample.prompt, str) and sample.prompt.strip():
        return sample.prompt.strip()
    raise ValueError("a GUI sample needs its task: the prompt 'domain/id' or metadata {domain, example_id}")


# ------------------------------------------------------------------------------------------------ trainer hooks


def service_options(args) -> dict:
    """The `gui` provider's options for the pool servers the trainer starts: what the loop reads (a text policy: the
    text view only; a screenshot policy: the screenshot, plus the text view when a step judge other than the LLM one
    may read it), --gui-tasks-dir, --gui-apps-dir."""
    if AgentSettings.from_args(args).observation == "text":
        observation = "text"
    else:
        observation = "screenshot" if getattr(args, "step_judge", None) in (None, "llm") else "both"
    options = {"observation": observation}
    if getattr(args, "gui_tasks_dir", None):
        options["tasks_dir"] = args.gui_tasks_dir
    if getattr(args, "gui_apps_dir", None):
        options["apps_dir"] = args.gui_apps_dir
    if getattr(args, "gui_sleep_after_execution", None) is not None:
        options["sleep_after_s"] = args.gui_sleep_after_execution
    if getattr(args, "gui_wait_after_reset", None) is not None:
        options["settle_s"] = args.gui_wait_after_reset
    return options


def _refused(message: str):
    def refuse(value: str):
        raise argparse.ArgumentTypeError(message)
    return refuse


def _one_judge_screen(value: str) -> int:
    if int(value) != 1:
        raise argparse.ArgumentTypeError(
            "the VLM step judge here sends the screen before the step and the one after it (upstream's value 1); "
            "earlier screens are not sent: give 1 or drop the flag")
    return 1


def add_custom_arguments(parser: argparse.ArgumentParser) -> None:
    """This setting's flags, declared here (upstream's `add_custom_arguments` hook: the trainer's parser calls it
    for a module the command line names), with upstream's GUI flag names beside this project's where the meaning is
    the same, and a message naming what to use where it is not."""
    g = parser.add_argument_group("GUI agent (gui-rl/generate_with_gui.py)")
    g.add_argument("--gui-observation", choices=["text", "screenshot"], default=None,
                   help="what the policy sees of the screen: its OCR text view (a text model; default) or "
                        "screenshots (a vision-language model, e.g. Qwen2.5-VL); env GUI_OBSERVATION")
    g.add_argument("--gui-history", "--gui-max-image-history-length", dest="gui_history", type=int, default=None,
                   help="screens in each step's prompt, the current one included (default 3; upstream's "
                        "--gui-max-image-history-length; env GUI_HISTORY). Earlier steps' action lines are always "
                        "listed; with 1, Qwen2.5-Coder's GUI demonstration steps averaged 884 prompt tokens, not 1,200")
    g.add_argument("--gui-tools", choices=["upstream", "lean"], default=None,
                   help="text observations: the system prompt and computer_use schema: upstream (default) or lean (a "
                        "short prompt and schema, the same calls: 316 prompt tokens of system prompt and tool instead "
                        "of 629 on Qwen2.5-Coder; env GUI_TOOLS)")
    g.add_argument("--gui-screenshot-max-pixels", type=int, default=None,
                   help="screenshots: scale each down to at most this many pixels before the policy sees it (fewer "
                        "image tokens; coordinates are relative); default: as the desktop sends")
    g.add_argument("--gui-tasks-dir", default=None,
                   help="the OSWorld-format task folders (<domain>/<id>.json) the started pool servers serve (env "
                        "GUI_TASKS_DIR; default gui-rl/tasks)")
    g.add_argument("--gui-apps-dir", default=None,
                   help="the apps folder the started pool servers' desktops mount (env GUI_APPS_DIR; default "
                        "gui-rl/apps): a method folder's own apps")
    g.add_argument("--gui-max-steps", type=int, default=None,
                   help="upstream's: steps per training episode (default --max-turns, else env GUI_MAX_STEPS, else 15)")
    g.add_argument("--gui-eval-max-steps", type=int, default=None,
                   help="upstream's: steps per evaluation episode (default: as training)")
    g.add_argument("--gui-sleep-after-execution", type=float, default=None,
                   help="upstream's: seconds the started pool servers wait after an action before reading the screen "
                        "(default 0.5)")
    g.add_argument("--gui-wait-after-reset", type=float, default=None,
                   help="upstream's: seconds after a task's setup before its first screen (default 0.5; upstream "
                        "waited 60 s for a cloud VM to settle, a local desktop is ready when its setup returns)")
    one_pool = ("training and evaluation share the pool servers here, so one value serves both: give "
                "--gui-sleep-after-execution / --gui-wait-after-reset and drop the --gui-eval-* one")
    g.add_argument("--gui-eval-sleep-after-execution", type=_refused(one_pool), default=None,
                   help="upstream's; refused: " + one_pool)
    g.add_argument("--gui-eval-wait-after-reset", type=_refused(one_pool), default=None,
                   help="upstream's; refused: " + one_pool)
    g.add_argument("--gui-max-reward-image-history-length", type=_one_judge_screen, default=None,
                   help="upstream's: screens before the step the VLM step judge sees; 1 (the screen before and after "
                        "the step) is what it sends here, other values are refused")


def _client(args):
    from slime.agentic.env_service.client import EnvClient
    from slime.agentic.env_service.launch import rollout_service

    url, key = rollout_service(args, "gui", service_options(args), "runs/gui")
    return EnvClient(url, key)


def step_judge(args):
    from slime.agentic.prm import judge_from_args

    screenshots = AgentSettings.from_args(args).observation == "screenshot"
    return judge_from_args(args, rules=GuiRuleJudge, llm=GuiVLMJudge if screenshots else GuiLLMJudge)


STOP_STRINGS = ("</tool_call>",)


def step_sampling_params(sampling_params: dict) -> dict:
    """A step's sampling: generation ends at the step's `</tool_call>` (kept in the text, `no_stop_trim`, so the
    parser sees the closed call; the ids are what was sampled). Without it a small model that skips its end-of-turn
    token writes on ("user\nAction: ...", a second call) and the step fails as two tool calls."""
    stop = list(dict.fromkeys([*(sampling_params.get("stop") or []), *STOP_STRINGS]))
    return {**sampling_params, "stop": stop, "no_stop_trim": True}


def _failed_sample(sample: Sample, tokenizer, task_key: str, error: str) -> list[Sample]:
    return failed_sample(sample, tokenizer, error, task_key=task_key, stop_reason="environment_error")


async def generate(args, sample: Sample, sampling_params: dict, evaluation: bool = False) -> list[Sample]:
    """The custom generate hook: one episode of the task in `sample`, one sample per step (`--gui-eval-max-steps`
    for an evaluation episode)."""
    from slime.rollout.data_source import load_tokenizer
    from slime.rollout.default_rollout import get_engine_client

    tokenizer = load_tokenizer(args.hf_checkpoint)
    task_key = task_of(sample)
    settings = AgentSettings.from_args(args, evaluation)
    context = getattr(args, "rollout_max_context_len", None) or 32768
    params = step_sampling_params(sampling_params)
    if settings.observation == "screenshot":
        from slime.agentic.vision_policy import VisionTurnPolicy
        from slime.models import resolve_model_path

        policy = VisionTurnPolicy(get_engine_client(args), tokenizer, params, context,
                                  resolve_model_path(args.hf_checkpoint))
    else:
        policy = EngineTurnPolicy(get_engine_client(args), tokenizer, params, context)
    seed = getattr(args, "rollout_seed", None) or getattr(args, "seed", 0) or 0
    request_id = f"{task_key}:{seed}:{sample.group_index}:{sample.index}:{time.time_ns()}"
    judge = step_judge(args)
    instruction = str((sample.metadata or {}).get("instruction", ""))
    judging = StepJudging(judge, instruction, seed * 100_003 + (sample.index or 0)) if judge is not None else None
    try:
        async with _client(args) as env:
            episode = await run_episode(policy, env, task_key, settings, request_id=request_id,
                                        on_step=judging.on_step if judging else None)
        prm_scores = await judging.scores() if judging else None
    except Exception as e:  # the environment failed: one FAILED sample that trains nothing, the batch goes on
        if judging is not None:
            judging.cancel()
        logger.warning("gui agent: episode of %s failed: %r", task_key, e)
        return _failed_sample(sample, tokenizer, task_key, repr(e))
    samples = episode_samples(episode, sample, prm_scores)
    if not samples:
        return _failed_sample(sample, tokenizer, task_key, f"no step fitted the context ({episode.stop_reason})")
    return samples


async def reward_func(args, item: Sample | list[Sample]):
    """{"score": +1 solved / -1, "acc": the evaluator's score, ...} per sample (every step gets its outcome; a judged
    step also its step_wise target)."""
    return rewards.outcome_rewards(args, item, outcome)


def outcome(meta: dict) -> dict:
    """An episode's reward fields from its metadata: solved (the evaluator's score 1) or not."""
    accuracy = float(meta.get("accuracy", 0.0))
    return {"score": 1.0 if accuracy == 1.0 else -1.0, "acc": accuracy,
            "truncated": float(meta.get("status") == "truncated"),
            "parse_error": float(int(meta.get("parse_error_count", 0)) > 0)}


class ScriptedGuiPolicy:
    """A policy that plays scripted solution steps (:mod:`.scripted`), resolving click targets on the screen text of
    the current message, as a text policy reads it; then terminates with success. Ids are the text's bytes."""

    def __init__(self, steps: list[dict]):
        self.steps = list(steps)

    async def generate_turn(self, messages: list[dict], tools=None) -> Turn:
        from slime.agentic.gui.scripted import resolve

        current = messages[-1]["content"]
        view = current.split("Screen text:\n", 1)[-1].split("\n\nPlease generate", 1)[0]
        step = self.steps.pop(0) if self.steps else {"action": "terminate", "status": "success"}
        text = tool_call_text("computer_use", resolve(step, view), f"Action: {describe(step)}")
        data = text.encode()
        return Turn(input_ids=list(current.encode()[-64:]), output_ids=list(data), logprobs=[0.0] * len(data),
                    text=text, finish_reason="stop")


def describe(step: dict) -> str:
    """The ``Action:`` line of a scripted step, in words (a solution step may give its own as ``say``)."""
    if step.get("say"):
        return str(step["say"])
    action, target = step.get("action"), step.get("target")
    if action == "terminate":
        return "The task is done." if step.get("status") == "success" else "This cannot be done here."
    if action == "type":
        return f"Type {step.get('text', '')!r}."
    if action == "key":
        return "Press " + "+".join(step.get("keys") or []) + "."
    if target:
        return f"{str(action).replace('_', ' ').capitalize()} on '{target}'."
    return f"{str(action).replace('_', ' ').capitalize()}."


__all__ = ["AgentSettings", "GuiEpisode", "GuiLLMJudge", "GuiRuleJudge", "GuiStep", "GuiVLMJudge", "ScriptedGuiPolicy",
           "StepJudging", "build_messages", "describe", "episode_samples", "generate", "reward_func", "run_episode",
           "step_sampling_params", "task_of", "vlm_judge_messages"]
