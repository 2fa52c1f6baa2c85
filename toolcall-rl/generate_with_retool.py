"""Tool-call RL (ReTool): the model writes Python, the sandbox runs it, the model answers.

    --extra-python-path toolcall-rl
    --custom-generate-function-path generate_with_retool.generate --custom-rm-path generate_with_retool.reward_func

This folder's method (upstream's `generate_with_retool.py` plays the same role): a fork edits this file.

One trajectory per problem: the prompt (a system message that declares the tools, the problem as the user
message) is rendered with the policy's chat template; then, turn by turn, the policy generates until a stop string
(`</tool_call>`, `</code>`) or its end of turn, the action is parsed, the code runs in a fresh sandbox
(`slime.agentic.sandbox`: no network, own directory, limits; numpy and sympy available), and the result comes back
as `<interpreter>…</interpreter>` (truncated), appended to the same assistant turn with loss mask 0, until the
policy writes `\\boxed{answer}`, a budget ends it, or the context is full. The stop strings mean the environment,
not the model, writes every observation (upstream set none).

Tools are declared in a JSON file (`TOOLS_CONFIG`, the usage guide's name, or `args.tools_config`): a list of
OpenAI function schemas, each with a `runner`: `"python"` runs the `code` argument in the sandbox, `"module:fn"`
awaits `fn(arguments: dict) -> str`. Without a file, the one tool is `code_interpreter`.

With `--dynamic-history` the trajectory comes back as one sample per generation step: its exact context ids as the
prompt and its generated ids and log-probs as the response (all steps share `group_index` and `index`); otherwise as
one sample whose observation tokens carry loss mask 0. Either way `metadata` holds the tool calls (all, and the
successful ones), the answer, the number of turns and, for `step_wise`, each step's token span.

The reward (`reward_func`): the last `\\boxed{}` compared by value with the label (`toolcall_data.answers_match`:
`\\frac{1}{2}` = `0.5`, where upstream compared strings), +1 if right, else upstream's tool-use shaping counting only
calls that ran without error (`rewards.retool_reward`).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from slime.agentic import rewards
from slime.agentic.tool_json import loads_tool_json
from slime.utils.types import Sample

SYSTEM_PROMPT = ("You are a helpful assistant that can use Python tools to solve mathematical problems. When you need "
                 "to perform calculations, use the code_interpreter tool to execute code and get results. When you "
                 "know the answer, write it as Answer: \\boxed{answer}.")
# the invalid-action message points at the format the system prompt advertises (upstream pointed at <code>)
INVALID_ACTION = ("My previous action is invalid. To run code, call the code_interpreter tool: "
                  "<tool_call>{\"name\": \"code_interpreter\", \"arguments\": {\"code\": \"...\"}}</tool_call>. "
                  "To give the final answer, write Answer: \\boxed{answer}. Let me try again.")
STOP_STRINGS = ("</tool_call>", "</code>")
MAX_OBSERVATION_CHARS = 1024
DEFAULT_MAX_TURNS = 8
DEFAULT_MAX_TOOL_CALLS = 8
DEFAULT_TOOL_TIMEOUT = 30.0

CODE_INTERPRETER = {
    "type": "function",
    "function": {
        "name": "code_interpreter",
        "description": "Run Python code in a fresh interpreter (numpy and sympy available) and return what it printed.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "the Python code"}},
                       "required": ["code"]},
    },
    "runner": "python",
}

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_CODE_TAG = re.compile(r"<code>\s*(.*?)\s*(?:</code>|$)", re.DOTALL)
_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


# ------------------------------------------------------------------------------------------------ tools


@dataclass
class Tool:
    schema: dict  # the OpenAI function schema shown to the model
    runner: str  # "python", or "module:callable"
    _fn: Callable[[dict], Awaitable[str]] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.schema["function"]["name"]


def load_tools(path: str | os.PathLike | None = None) -> list[Tool]:
    """The tools of a `TOOLS_CONFIG` JSON file (a list of function schemas with a `runner`), or code_interpreter."""
    if path is None:
        entries = [CODE_INTERPRETER]
    else:
        with open(path, encoding="utf-8") as fh:
            try:
                entries = json.load(fh)
            except ValueError as exc:
                raise ValueError(f"{path}: not JSON: {exc}") from None
        if not isinstance(entries, list) or not entries:
            raise ValueError(f"{path}: expected a non-empty JSON list of tool declarations")
    tools = []
    for i, entry in enumerate(entries):
        fn = entry.get("function") if isinstance(entry, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or entry.get("type", "function") != "function":
            raise ValueError(f"{path}: tool {i} must be {{'type': 'function', 'function': {{'name': ...}}, 'runner': ...}}")
        runner = entry.get("runner", "python")
        if runner != "python" and ":" not in str(runner):
            raise ValueError(f"{path}: tool {fn['name']!r}: runner must be 'python' or 'module:callable', got {runner!r}")
        schema = {"type": "function", "function": fn}
        tools.append(Tool(schema, runner))
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: tool names repeat: {names}")
    return tools


def tools_for(args) -> list[Tool]:
    path = os.environ.get("TOOLS_CONFIG") or getattr(args, "tools_config", None)
    key = str(path)
    if key not in _TOOLS_CACHE:
        _TOOLS_CACHE[key] = load_tools(path)
    return _TOOLS_CACHE[key]


_TOOLS_CACHE: dict[str, list[Tool]] = {}


# ------------------------------------------------------------------------------------------------ actions


@dataclass
class Action:
    kind: str  # "tool" | "answer" | "invalid"
    tool: str | None = None
    arguments: dict | None = None
    answer: str | None = None


def parse_action(text: str, tool_names: frozenset[str] = frozenset({"code_interpreter"})) -> Action:
    """What one generation step asks for. A call (`<tool_call>{json}</tool_call>` naming a declared tool, or code
    in `<code>` or a fenced block, which go to code_interpreter) or a final `\\boxed{}` answer: whichever comes
    last in the text wins (a model that computes and then answers has answered). Anything else is invalid."""
    candidates: list[tuple[int, Action]] = []
    for match in _TOOL_CALL.finditer(text):
        try:
            # strict=False: raw newlines inside the code string are accepted as they are (upstream replaced every
            # newline by "\n" first, which broke pretty-printed JSON)
            call = loads_tool_json(match.group(1))
        except ValueError:
            continue
        if not isinstance(call, dict) or call.get("name") not in tool_names:
            continue
        arguments = call.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = loads_tool_json(arguments)
            except ValueError:
                continue
        if isinstance(arguments, dict) and (call["name"] != "code_interpreter" or str(arguments.get("code", "")).strip()):
            candidates.append((match.start(), Action("tool", call["name"], arguments)))
    if "code_interpreter" in tool_names:
        for pattern in (_CODE_TAG, _FENCE):
            for match in pattern.finditer(text):
                if match.group(1).strip():
                    candidates.append((match.start(), Action("tool", "code_interpreter", {"code": match.group(1)})))
    answer_at = text.rfind("\\boxed")
    answer = rewards.boxed_answer(text)
    if answer is not None and answer.strip():
        candidates.append((answer_at, Action("answer", answer=answer.strip())))
    if not candidates:
        return Action("invalid")
    return max(candidates, key=lambda item: item[0])[1]


def format_observation(text: str, max_chars: int = MAX_OBSERVATION_CHARS) -> str:
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n... ({len(text) - max_chars} more characters)"
    return f"\n\n<interpreter>\n{text}\n</interpreter>\n\n"


async def run_tool(tool: Tool, arguments: dict, timeout: float) -> tuple[str, bool, str]:
    """(what the tool said, whether it ran without error, the whole-sandbox budget it went over or "": then the
    episode is over and scores -1, as in every agentic setting)."""
    if tool.runner == "python":
        from slime.agentic.sandbox import run_python

        result = await run_python(str(arguments.get("code", "")), timeout=timeout)
        out = result.stdout
        if result.budget_exceeded:
            note = f"[The sandbox {result.budget_exceeded}. The episode is over: no more code runs.]"
            return (out + "\n" + note).strip(), False, result.budget_exceeded
        if result.timed_out:
            return (out + f"\nError: the code ran past its {timeout:.0f} s limit and was stopped").strip(), False, ""
        if result.stderr.strip():
            out = (out + "\nErrors:\n" + result.stderr).strip()
        if result.exit_code != 0:
            return (out or f"Error: the process exited with code {result.exit_code}").strip(), False, ""
        return out.strip() or "(no output: print what you want to see)", True, ""
    if tool._fn is None:
        from slime.utils.plugins import import_factory

        tool._fn = import_factory(tool.runner, f"tool runner of {tool.name}")
    try:
        value = await asyncio.wait_for(tool._fn(arguments), timeout)
    except Exception as exc:  # noqa: BLE001 - a tool's failure is the model's observation, not a crash
        return f"Error: {type(exc).__name__}: {exc}", False, ""
    return str(value), True, ""


# ------------------------------------------------------------------------------------------------ the loop


def _prompt_messages(sample: Sample) -> list[dict]:
    prompt = sample.prompt
    if isinstance(prompt, list):
        return [m for m in prompt if isinstance(m, dict)]
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": str(prompt)}]


async def generate(args, sample: Sample, sampling_params: dict) -> Sample | list[Sample]:
    """One ReTool trajectory for `sample` (its `prompt` the problem, its `label` the answer)."""
    from slime.models.chat_template import render_prompt_ids
    from slime.rollout.data_source import load_tokenizer
    from slime.rollout.default_rollout import get_engine_client

    tokenizer = load_tokenizer(args.hf_checkpoint)
    tools = tools_for(args)
    by_name = {t.name: t for t in tools}
    prompt_ids = render_prompt_ids(tokenizer, _prompt_messages(sample), [t.schema for t in tools])
    max_context = getattr(args, "rollout_max_context_len", None) or 32768
    max_turns = int(getattr(args, "max_turns", None) or DEFAULT_MAX_TURNS)
    max_calls = int(getattr(args, "max_tool_calls", None) or DEFAULT_MAX_TOOL_CALLS)
    tool_timeout = float(getattr(args, "tool_timeout", None) or DEFAULT_TOOL_TIMEOUT)
    client = get_engine_client(args)
    judge = _step_judge(args)
    judged: list[asyncio.Task] = []  # one PRM judgement per step, started once its observation is known

    response_ids: list[int] = []
    loss_mask: list[int] = []
    logprobs: list[float] = []
    steps: list[dict] = []  # per generation step: its context, ids, log-probs, span in the response
    calls = successful = invalid = 0
    answer = None
    over_budget = ""
    status = Sample.Status.COMPLETED
    finish = "stop"
    for turn in range(max_turns):
        room = max_context - len(prompt_ids) - len(response_ids)
        if room <= 0:
            status = Sample.Status.TRUNCATED
            break
        params = dict(sampling_params)
        params["stop"] = list(dict.fromkeys([*(params.get("stop") or []), *STOP_STRINGS]))
        if params.get("max_new_tokens") is not None:
            params["max_new_tokens"] = min(int(params["max_new_tokens"]), room)
        context = prompt_ids + response_ids
        output = await client.generate(input_ids=context, sampling_params=params, return_logprob=True)
        meta = output["meta_info"]
        entries = meta.get("output_token_logprobs") or []
        new_ids = [int(e[1]) for e in entries]
        new_lps = [float(e[0]) for e in entries]
        finish = (meta.get("finish_reason") or {}).get("type", "stop")
        start = len(response_ids)
        response_ids += new_ids
        loss_mask += [1] * len(new_ids)
        logprobs += new_lps
        steps.append({"context": context, "ids": new_ids, "logprobs": new_lps, "span": (start, len(response_ids))})
        if finish == "abort":
            status = Sample.Status.ABORTED
            break
        action = parse_action(output.get("text", ""), frozenset(by_name))
        if action.kind == "answer":
            answer = action.answer
            break
        if finish == "length":
            status = Sample.Status.TRUNCATED
            break
        if action.kind == "tool":
            if calls >= max_calls:
                observation = format_observation(f"Error: the budget of {max_calls} tool calls is spent; answer now.")
            else:
                calls += 1
                said, ok, over_budget = await run_tool(by_name[action.tool], action.arguments or {}, tool_timeout)
                successful += ok
                observation = format_observation(said)
        else:
            invalid += 1
            observation = format_observation(INVALID_ACTION)
        if judge is not None:
            judged.append(_judge_step(judge, tokenizer, sample, response_ids[:start], new_ids, observation, len(steps) - 1,
                                      getattr(args, "rollout_seed", None) or getattr(args, "seed", 0) or 0))
        obs_ids = tokenizer.encode(observation, add_special_tokens=False)
        response_ids += obs_ids
        loss_mask += [0] * len(obs_ids)
        logprobs += [0.0] * len(obs_ids)
        if over_budget:  # the code went over a whole-sandbox budget: the episode ends here, scored -1
            break
    else:
        status = Sample.Status.TRUNCATED if answer is None else status  # the turn budget ran out

    if not steps:  # the prompt alone fills the context: nothing was generated, nothing to train
        sample.tokens, sample.response_length, sample.response = list(prompt_ids), 0, ""
        sample.loss_mask, sample.rollout_log_probs = [], []
        sample.status, sample.remove_sample = Sample.Status.TRUNCATED, True
        sample.metadata = {**(sample.metadata or {}), "tool_calls": 0, "successful_tool_calls": 0, "answer": None,
                           "invalid_actions": 0, "turns": 0, "finish_reason": "length", "step_wise": {"step_indices": [],
                                                                               "step_token_spans": []}}
        return sample
    if judge is not None and len(judged) < len(steps):  # the last step (an answer, or cut off) has no observation
        judged.append(_judge_step(judge, tokenizer, sample, response_ids[:steps[-1]["span"][0]], steps[-1]["ids"], "",
                                  len(steps) - 1, getattr(args, "rollout_seed", None) or getattr(args, "seed", 0) or 0))
    prm_scores = list(await asyncio.gather(*judged)) if judged else None
    metadata = {**(sample.metadata or {}), "tool_calls": calls, "successful_tool_calls": successful,
                "answer": answer, "invalid_actions": invalid, "turns": len(steps), "finish_reason": finish,
                "budget_exceeded": over_budget,
                "step_wise": {"step_indices": list(range(len(steps))),
                              "step_token_spans": [list(s["span"]) for s in steps], "prm_scores": prm_scores}}
    if getattr(args, "dynamic_history", False):
        out = []
        for k, step in enumerate(steps):
            part = Sample(group_index=sample.group_index, index=sample.index, prompt=sample.prompt, label=sample.label,
                          tokens=step["context"] + step["ids"], response_length=len(step["ids"]),
                          response=tokenizer.decode(step["ids"]), loss_mask=[1] * len(step["ids"]),
                          rollout_log_probs=list(step["logprobs"]), status=status,
                          metadata={**metadata, "step": k,
                                    "step_wise": {"step_indices": [k], "step_token_spans": [[0, len(step["ids"])]],
                                                  "prm_scores": [prm_scores[k]] if prm_scores else None}})
            out.append(part)
        return out
    sample.tokens = prompt_ids + response_ids
    sample.response_length = len(response_ids)
    sample.response = tokenizer.decode(response_ids)
    sample.loss_mask = loss_mask
    sample.rollout_log_probs = logprobs
    sample.status = status
    sample.metadata = metadata
    return sample


def _step_judge(args):
    """The PRM of `--step-judge` (default: `llm` when a PRM engine is configured, else none)."""
    from slime.agentic.prm import judge_from_args

    return judge_from_args(args, rules=RuleStepJudge)


class RuleStepJudge:
    """The tool-call setting's PRM on CPU, from what the environment said (no model): +1 for a call that ran without
    error, -1 for an action the loop could not parse, a call that failed or one over the budget (anything on stderr
    counts as failed); for the final
    answer, +1 when the boxed value is something an earlier call printed (the answer rests on a computation), else
    -1 (a guess). Same interface as `prm.StepJudge`; deterministic, so the seed is unused."""

    def __init__(self, args=None):  # also a `--step-judge module:factory` factory: factory(args)
        pass

    async def score(self, problem: str, history: str, action: str, observation: str, *, step_index: int,
                    seed: int = 0) -> float:
        inner = observation.strip().removeprefix("<interpreter>").removesuffix("</interpreter>").strip()
        if inner:  # a call or an invalid action: the environment answered
            if inner == INVALID_ACTION:
                return -1.0
            # run_tool's failures: "Error: ..." (exit status, timeout, budget) or the program's "Errors:" (stderr)
            failed = any(line.startswith(("Error:", "Errors:")) for line in inner.splitlines())
            return -1.0 if failed else 1.0
        answer = rewards.boxed_answer(action)
        if answer is None:
            return -1.0  # cut off, or no action at all
        printed = [block.strip() for block in re.findall(r"<interpreter>\n(.*?)\n</interpreter>", history, re.DOTALL)]
        return 1.0 if any(answer.strip() and answer.strip() in block for block in printed) else -1.0


def _judge_step(judge, tokenizer, sample: Sample, before: list[int], action_ids: list[int], observation: str,
                step_index: int, seed: int) -> asyncio.Task:
    problem = sample.prompt if isinstance(sample.prompt, str) else str(sample.prompt)
    history = tokenizer.decode(before, skip_special_tokens=True)
    action = tokenizer.decode(action_ids, skip_special_tokens=True)
    return asyncio.create_task(judge.score(problem, history, action, observation.strip(), step_index=step_index,
                                           seed=seed * 100_003 + (sample.index or 0)))


async def reward_func(args, item: Sample | list[Sample]):
    """{"score", "acc"} for a trajectory; for the step samples of one (dynamic history), the same for each."""
    from toolcall_data import answers_match

    samples = item if isinstance(item, list) else [item]
    out = []
    checked: dict[tuple[str, str], bool] = {}  # the step samples of a trajectory share its answer: check it once
    for s in samples:
        meta = s.metadata or {}
        answer = meta.get("answer")
        correct = False
        if answer and s.label is not None:
            key = (str(answer), str(s.label))
            if key not in checked:
                checked[key] = await asyncio.to_thread(answers_match, *key)
            correct = checked[key]
        score = rewards.retool_reward(correct, int(meta.get("tool_calls", 0)),
                                      successful_tool_calls=int(meta.get("successful_tool_calls", 0)))
        if meta.get("budget_exceeded"):  # the episode ended at a whole-sandbox budget
            score, correct = -1.0, False
        # the components besides the trained score are what evaluation reports per dataset (eval/<name>/<key>)
        reward = {"score": score, "acc": float(correct), "tool_call": float(int(meta.get("tool_calls", 0)) > 0),
                  "answered": float(answer is not None), "parse_error": float(int(meta.get("invalid_actions", 0)) > 0),
                  "budget_exceeded": float(bool(meta.get("budget_exceeded")))}
        reward.update(rewards.step_reward_fields(meta, score, float(getattr(args, "prm_step_coef", 1.0))))
        out.append(reward)
    return out if isinstance(item, list) else out[0]


def add_custom_arguments(parser) -> None:
    """This setting's flags, declared here rather than by the framework's parser (upstream's `add_custom_arguments`
    hook: the trainer's parser calls it for a module its command line names), so a fork changes or adds its own."""
    g = parser.add_argument_group("tool-call agent (toolcall-rl/generate_with_retool.py)")
    g.add_argument("--tools-config", default=None,
                   help="the agent's tools: a JSON list of function schemas with a `runner` "
                        "(env TOOLS_CONFIG wins); default: code_interpreter")
    g.add_argument("--max-tool-calls", type=int, default=None, help="tool calls per trajectory (default 8)")
    g.add_argument("--tool-timeout", type=float, default=None, help="seconds per tool call (default 30)")
