"""The GUI agent's messages (upstream's layout with screens as text), its rule judge and its rewards: pure."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from generate_with_gui import (
    AgentSettings,
    GuiLLMJudge,
    GuiRuleJudge,
    GuiStep,
    ScriptedGuiPolicy,
    build_messages,
    reward_func,
)
from slime.agentic.gui.actions import parse_response
from slime.agentic.agent_loop import Turn, tool_call_text
from slime.utils.types import Sample


def step(text: str, before: str, after: str = "", error: str = "", arguments=None, special=None) -> GuiStep:
    return GuiStep(Turn([1], [2], [0.0], text, "stop"), action_line=text.split("\n")[0], arguments=arguments,
                   error=error, screen_before=before, screen_after=after, special=special)


def test_messages_keep_the_last_steps_and_every_action_line():
    steps = [step(f"A{i}", f"screen {i} [1, 1]") for i in range(4)]
    steps[-1].error = "no <tool_call>"
    messages = build_messages("Do the thing", steps, {"text_view": "now [5, 5]"}, AgentSettings(history=3))
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"].endswith("screen 2 [1, 1]") and messages[4]["content"] == "A3"
    current = messages[-1]["content"]
    assert current.startswith("Your last response could not be run: no <tool_call>\nScreen text:\nnow [5, 5]")
    assert "Instruction: Do the thing" in current and "Step 1: A0" in current and "Step 4: A3" in current
    first = build_messages("x", [], {"text_view": ""}, AgentSettings())
    assert len(first) == 2 and "(no text on the screen)" in first[1]["content"] and "Previous actions:\nNone" in \
        first[1]["content"]


def test_history_one_keeps_only_the_current_screen_and_every_action_line():
    steps = [step(f"A{i}", f"screen {i} [1, 1]") for i in range(3)]
    messages = build_messages("Do it", steps, {"text_view": "now [5, 5]"}, AgentSettings(history=1))
    assert [m["role"] for m in messages] == ["system", "user"]
    assert not any(f"screen {i}" in messages[1]["content"] for i in range(3)) and "now [5, 5]" in messages[1]["content"]
    assert all(f"Step {i + 1}: A{i}" in messages[1]["content"] for i in range(3))
    with pytest.raises(ValueError, match="at least 1"):
        AgentSettings(history=0)


def test_the_lean_tool_profile_is_a_shorter_prompt_for_the_same_calls():
    from types import SimpleNamespace

    from slime.agentic.gui.actions import ACTIONS, COMPUTER_USE, LEAN_COMPUTER_USE
    from generate_with_gui import LEAN_SYSTEM_PROMPT, SYSTEM_PROMPT

    lean = AgentSettings(tools="lean")
    assert (lean.prompt, lean.tool_schemas) == (LEAN_SYSTEM_PROMPT, [LEAN_COMPUTER_USE])
    assert (AgentSettings().prompt, AgentSettings().tool_schemas) == (SYSTEM_PROMPT, [COMPUTER_USE])
    schema = LEAN_COMPUTER_USE["function"]
    assert schema["name"] == COMPUTER_USE["function"]["name"]
    assert set(schema["parameters"]["properties"]["action"]["enum"]) < set(ACTIONS)
    assert len(json.dumps(LEAN_COMPUTER_USE)) + len(LEAN_SYSTEM_PROMPT) < \
        0.5 * (len(json.dumps(COMPUTER_USE)) + len(SYSTEM_PROMPT))
    # a lean call is an ordinary call: the same parser reads it
    call = tool_call_text("computer_use", {"action": "left_click", "coordinate": [10, 20]}, "Action: click")
    assert parse_response(call)[1] == {"action": "left_click", "coordinate": [10, 20]}
    with pytest.raises(ValueError, match="text policy"):
        AgentSettings(tools="lean", observation="screenshot")
    with pytest.raises(ValueError, match="tools must be"):
        AgentSettings(tools="short")
    flags = AgentSettings.from_args(SimpleNamespace(max_turns=5, gui_history=1, gui_tools="lean"))
    assert (flags.max_steps, flags.history, flags.tools) == (5, 1, "lean")


def test_the_scripted_policy_reads_targets_off_the_current_screen():
    messages = build_messages("x", [], {"text_view": "Save [100, 200]\nCancel [300, 400]"}, AgentSettings())
    turn = asyncio.run(ScriptedGuiPolicy([{"action": "left_click", "target": "cancel"}]).generate_turn(messages))
    assert parse_response(turn.text)[1] == {"action": "left_click", "coordinate": [300, 400]}
    assert parse_response(tool_call_text("computer_use", {"action": "wait"}, "Action: pause"))[0] == "pause"


def test_the_rule_judge_and_the_rewards():
    judge = GuiRuleJudge()
    score = lambda s: asyncio.run(judge.score_step(s))  # noqa: E731
    assert score(step("x", "a", "a", error="bad")) == -1.0
    assert score(step("x", "a", "b", arguments={"action": "left_click"})) == 1.0
    assert score(step("x", "a", "a", arguments={"action": "left_click"})) == -1.0  # nothing visible changed
    assert score(step("x", "a", "a", arguments={"action": "terminate"}, special="DONE")) == 1.0
    samples = [Sample(metadata={"accuracy": 1.0, "step_wise": {"prm_scores": [-1.0]}}),
               Sample(metadata={"accuracy": 0.5, "status": "truncated"})]
    out = asyncio.run(reward_func(None, samples))
    assert out[0]["score"] == 1.0 and out[0]["prm_step_score"] == -1.0
    assert samples[0].metadata["step_wise"]["step_scores_with_outcome"] == [0.0]
    assert out[1]["score"] == -1.0 and out[1]["acc"] == 0.5 and out[1]["truncated"] == 1.0  # fractional: unsolved


def test_the_provider_refuses_bad_options_and_attaches_an_osworld_vm_by_url():
    import pytest

    from slime.agentic.env_service.providers import LeaseContext
    from slime.agentic.gui.desktop import LocalDesktop, OSWorldVM
    from slime.agentic.gui.provider import GuiProvider

    with pytest.raises(ValueError, match="observation"):
        GuiProvider(observation="pixels")
    with pytest.raises(ValueError, match="needs vm_url"):
        GuiProvider(desktop="osworld")
    lease = LeaseContext("run-1", "notes/append-line", "/tmp")
    vm = GuiProvider(desktop="osworld", vm_url="http://10.0.0.5:5000").new_desktop(lease)
    assert isinstance(vm, OSWorldVM) and vm.url == "http://10.0.0.5:5000"
    assert isinstance(GuiProvider().new_desktop(lease), LocalDesktop)


def test_the_llm_judge_speaks_the_step_judges_interface():
    """`--step-judge llm` wraps slime.agentic.prm.StepJudge (its `score`): the step's response, the screen text before
    as history and after as the observation; the judge's vote is the step's score (None: unjudged)."""
    calls = []

    class Votes:  # StepJudge.score's signature; the engine behind it is tested with the judge itself
        async def score(self, problem, history, action, observation, *, step_index, seed=0):
            calls.append((problem, history, action, observation, step_index, seed))
            return None if step_index else 1.0

    judge = GuiLLMJudge(Votes())
    first = asyncio.run(judge.score_step(step("Action: x", "before [1, 1]", "after [1, 1]"), instruction="Do it",
                                         step_index=0, seed=7))
    failed = asyncio.run(judge.score_step(step("oops", "b [1, 1]", error="no <tool_call>"), step_index=1))
    assert (first, failed) == (1.0, None)
    assert calls[0] == ("Do it", "Screen text before the step:\nbefore [1, 1]", "Action: x",
                        "Screen text after the step:\nafter [1, 1]", 0, 7)
    assert calls[1][3].endswith("no <tool_call>")


class _Desktop:
    """A desktop whose actions all exit 1 (the provider's `observe` reads its OCR view: empty)."""

    class client:  # noqa: N801 - the provider reads `desktop.client`
        @staticmethod
        async def execute(command, timeout=None):
            return {"returncode": 1, "error": "Traceback: boom"}

        @staticmethod
        async def accessibility():
            return ""


def test_the_provider_codes_a_refused_call_apart_from_a_failed_action():
    from slime.agentic.gui.actions import ACTION_FAILED, REFUSED
    from slime.agentic.gui.provider import GuiEnv, GuiProvider

    provider = GuiProvider(observation="text", sleep_after_s=0)
    env = GuiEnv(task=None, desktop=_Desktop(), screen=(1280, 720))

    def call(name, arguments):
        return asyncio.run(provider.exec_tool(env, {"name": name, "arguments": arguments}))

    refused = [call("shell", {}), call("computer_use", ["left_click"]), call("computer_use", {"action": "fly"})]
    assert [(r["error"], r["error_code"]) for r in refused] == [(True, REFUSED)] * 3
    assert env.steps == 0  # nothing ran
    failed = call("computer_use", {"action": "left_click", "coordinate": [10, 10]})
    assert (failed["error"], failed["error_code"], env.steps) == (True, ACTION_FAILED, 1)
    assert "boom" in failed["observation"]


class _Env:
    """An env service whose every `computer_use` call answers `reply` (the fields the pool server passes through)."""

    def __init__(self, reply: dict):
        self.reply, self.calls = reply, 0

    async def allocate(self, task_key, request_id=None):
        return {"lease_id": "l1"}

    async def reset(self, lease, task_meta=None):
        return {"instruction": "Do it", "text_view": "screen [1, 1]"}

    async def heartbeat(self, lease):
        pass

    def keep_alive(self, lease):
        return contextlib.nullcontext()

    async def exec_tool(self, lease, name, arguments):
        self.calls += 1
        return dict(self.reply)

    async def evaluate(self, lease):
        return {"acc": 0.0}

    async def close(self, lease):
        return True


def test_the_loop_counts_a_refused_call_by_its_code_not_its_wording():
    from slime.agentic.gui.actions import ACTION_FAILED, REFUSED
    from generate_with_gui import run_episode

    clicks = [{"action": "left_click", "coordinate": [10, 10]}] * 5
    settings = AgentSettings(max_steps=4, max_parse_errors=2)
    # refused, in words that do not say so: each counts as a response without a valid action
    env = _Env({"observation": "the environment declined", "error": True, "error_code": REFUSED})
    refused = asyncio.run(run_episode(ScriptedGuiPolicy(clicks), env, "t/1", settings))
    assert (refused.status, refused.stop_reason, refused.parse_errors, env.calls) == ("failed", "parse_errors", 2, 2)
    assert refused.steps[-1].error == "the environment declined"
    # an action that ran and failed, whatever its words say, is a valid action: the episode runs to max_steps
    env = _Env({"observation": "[TOOL_ERROR] exit 1", "error": True, "error_code": ACTION_FAILED})
    failed = asyncio.run(run_episode(ScriptedGuiPolicy(clicks), env, "t/1", settings))
    assert (failed.status, failed.stop_reason, failed.parse_errors, env.calls) == ("truncated", "max_steps", 0, 4)
    assert all(s.error == "[TOOL_ERROR] exit 1" for s in failed.steps)


def test_a_desktop_over_its_budget_ends_the_episode_with_minus_one():
    from slime.agentic.gui.provider import GuiEnv, GuiProvider

    class Box:  # the desktop's sandbox: its group reports the memory budget gone over after the first action
        note = ""

        def budget_exceeded(self):
            return self.note

    desktop = _Desktop()
    desktop.box = Box()
    provider = GuiProvider(observation="text", sleep_after_s=0)
    env = GuiEnv(task=None, desktop=desktop, screen=(1280, 720))
    first = asyncio.run(provider.exec_tool(env, {"name": "computer_use", "arguments": {"action": "wait", "time": 0}}))
    assert first["done"] is False
    desktop.box.note = "went over its memory budget (3072 MiB for all its processes together)"
    over = asyncio.run(provider.exec_tool(env, {"name": "computer_use",
                                                "arguments": {"action": "left_click", "coordinate": [5, 5]}}))
    assert over["done"] and over["status"] == "BUDGET" and over["episode_over"] and "memory budget" in over["observation"]
    result = asyncio.run(provider.evaluate(env, {}))
    assert result["score"] == -1.0 and "memory budget" in result["reason"]
    from generate_with_gui import GuiRuleJudge, GuiStep

    step = GuiStep(turn=None, arguments={"action": "left_click"}, special="BUDGET")
    assert asyncio.run(GuiRuleJudge().score_step(step)) == -1.0


def test_the_folder_declares_its_flags_with_upstreams_names_beside_ours(capsys):
    """gui-rl/generate_with_gui.py declares the GUI flags (`add_custom_arguments`), not the framework's parser:
    upstream's names map to the same settings, and the ones that would mean something else here are refused with
    a message saying what to use."""
    from types import SimpleNamespace

    from generate_with_gui import AgentSettings, service_options

    from slime.utils.arguments import parse_args

    base = ["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", "--num-rollout", "3",
            "--disable-rollout-global-dataset", "--custom-generate-function-path", "generate_with_gui.generate"]
    args = parse_args(base + ["--gui-max-image-history-length", "2", "--gui-max-steps", "30", "--gui-eval-max-steps",
                              "5", "--gui-sleep-after-execution", "0.0", "--gui-wait-after-reset", "60",
                              "--gui-max-reward-image-history-length", "1", "--gui-tools", "lean"])
    assert args.gui_history == 2 and AgentSettings.from_args(args).history == 2
    assert AgentSettings.from_args(args).max_steps == 30 and AgentSettings.from_args(args, evaluation=True).max_steps == 5
    options = service_options(args)
    assert (options["sleep_after_s"], options["settle_s"]) == (0.0, 60.0)
    # without them: the provider's defaults, and --max-turns as the step budget
    plain = SimpleNamespace(max_turns=7)
    assert "sleep_after_s" not in service_options(plain) and AgentSettings.from_args(plain, evaluation=True).max_steps == 7
    for flag, value, says in [("--gui-eval-sleep-after-execution", "5.0", "share the pool servers"),
                              ("--gui-eval-wait-after-reset", "60", "share the pool servers"),
                              ("--gui-max-reward-image-history-length", "3", "screen before the step")]:
        with pytest.raises(SystemExit):
            parse_args(base + [flag, value])
        assert says in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the framework's parser alone does not know them
        parse_args(base[:-2] + ["--gui-history", "1"])
    assert "--gui-history" in capsys.readouterr().err
