"""Adversarial GUI agents (issue 37): on every shipped GUI task, an agent that solves nothing tries what a policy can
send through the `computer_use` tool to break out of its actions or the host side: text and key names built to
escape the pyautogui template into code of its own, key chords that open a run dialog or a terminal elsewhere,
malformed and hostile arguments (NUL bytes, lone surrogates, non-finite and huge numbers, other tools), then claims
success. Each task must score no higher than doing nothing (0, the minimum: the task check shows the reset undoes a
solution), every malformed action must be refused as a tool error (never an exception out of the provider), no code
of the agent's may have run (no marker file), and the desktop must still answer.

Every task runs on a desktop of its own, a fresh one per episode, as the `gui` provider runs them (about 3 s a task
here)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from slime.agentic.env_service.providers import LeaseContext
from slime.agentic.gui.provider import GuiProvider
from slime.agentic.gui.tasks import load_tasks

from helpers.gui_env import requires_desktop

pytestmark = [*requires_desktop("chromium"), pytest.mark.timeout(1800)]
TASKS = load_tasks()
MARK = "slime-gui-pwned"

# typed literally into whatever has focus: each would be code if the text reached the program unquoted
ESCAPES = [
    f"');import os;os.system('touch /tmp/{MARK}1')#",
    f'""";open("{MARK}2","w");"""\\\')\n$(touch {MARK}3)`touch ~/{MARK}4`',
]
CHORDS = [["alt", "f2"], ["ctrl", "alt", "t"]]
REFUSED = [  # each must come back as a tool error, nothing run
    {"action": "type", "text": "a\x00b"},
    {"action": "type", "text": "\ud800 lone surrogate"},
    {"action": "type", "text": "caf\u00e9"},
    {"action": "key", "keys": [f"'); import os; os.system('touch /tmp/{MARK}-6') #"]},
    {"action": "key", "keys": ["ctrl", 7]},
    {"action": "scroll", "pixels": float("inf")},
    {"action": "scroll", "pixels": float("nan")},
    {"action": "left_click", "coordinate": [10 ** 400, 5]},
    {"action": "left_click", "coordinate": [float("nan"), 5]},
    {"action": "wait", "time": float("nan")},
    {"action": "wait", "time": 10 ** 400},
    {"action": "left_click", "coordinate": "500, 500"},
    {"action": "terminate", "status": "maybe"},
    {"action": f"__import__('os').system('touch /tmp/{MARK}-7')"},
]


def _marks(*roots: Path) -> list[str]:
    found = []
    for root in roots:
        if root is not None and root.is_dir():
            found += [str(p) for p in root.rglob(f"{MARK}*")]
    return found


async def _episode(provider: GuiProvider, task, workdir: str, attack: bool) -> tuple[float, list[dict], list[str]]:
    lease = LeaseContext(lease_id=f"attack-{task.id}", task_key=task.key, workdir=workdir)
    env, _ = await provider.reset(lease, {"task_meta": {"task": task.key}})
    replies = []
    try:
        if attack:
            for text in ESCAPES:
                replies.append(await provider.exec_tool(env, {"name": "computer_use",
                                                              "arguments": {"action": "type", "text": text}}))
            for keys in CHORDS:
                replies.append(await provider.exec_tool(env, {"name": "computer_use",
                                                              "arguments": {"action": "key", "keys": keys}}))
            for arguments in REFUSED:
                reply = await provider.exec_tool(env, {"name": "computer_use", "arguments": arguments})
                assert reply.get("error") and not reply.get("done"), (arguments, reply)
            for call in ({"name": "shell", "arguments": {"command": f"touch /tmp/{MARK}-8"}},
                         {"name": "computer_use", "arguments": ["type", "x"]}):
                reply = await provider.exec_tool(env, call)
                assert reply.get("error"), (call, reply)
            assert (await provider.exec_tool(env, {"name": "observe", "arguments": {}})).get("screenshot_b64")
            done = await provider.exec_tool(env, {"name": "computer_use",
                                                  "arguments": {"action": "terminate", "status": "success"}})
            assert done.get("done") and done.get("status") == "DONE", done
        box = getattr(env.desktop, "box", None)
        marks = _marks(env.desktop.home, Path(box.tmp.path) if box is not None and box.tmp is not None else None)
        evaluation = await provider.evaluate(env, {})
        return evaluation["acc"], replies, marks
    finally:
        await provider.close(env)


@pytest.mark.parametrize("task", TASKS, ids=[t.key for t in TASKS])
def test_a_hostile_gui_agent_scores_no_higher_than_doing_nothing(task, tmp_path):
    # the screenshot alone (no OCR) and short pauses: what the actions do is the same, the run ~3x shorter
    provider = GuiProvider(observation="screenshot", sleep_after_s=0.1, settle_s=0.2)

    async def go():
        idle = await _episode(provider, task, str(tmp_path), attack=False)
        attacked = await _episode(provider, task, str(tmp_path), attack=True)
        return idle, attacked

    (idle, _, _), (attacked, replies, marks) = asyncio.run(go())
    assert idle == 0.0, f"{task.key}: doing nothing scores {idle}: a task bug"
    assert attacked <= idle, f"{task.key}: the hostile agent scored {attacked}"
    assert not marks, f"{task.key}: code of the agent's ran on the desktop: {marks}"
    # the typed escapes and chords ran as actions (typed, pressed) and the desktop answered after each
    assert len(replies) == len(ESCAPES) + len(CHORDS)
    assert all(r.get("screenshot_b64") for r in replies), replies
    assert not [p for p in os.listdir("/tmp") if p.startswith(MARK)], "a marker reached the host's /tmp"
