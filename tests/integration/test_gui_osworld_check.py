"""`python -m slime.agentic.gui.check` over a task set in OSWorld's layout (``evaluation_examples/examples/<domain>/
<id>.json`` and a set file): tasks without a scripted solution are checked idle (setup and evaluator run, doing
nothing scores 0), solutions come from a folder of their own (``--solutions-dir``), and ``--runnable`` skips, with
the reason, what cannot run here. In the `osworld_apps` tier (a terminal installed): Ctrl+Alt+T opens a terminal as on
OSWorld's image, and a settings task in OSWorld's form is solved by typing into it."""

from __future__ import annotations

import json

import pytest

from slime.agentic.gui.check import main

from helpers.gui_env import requires_desktop

pytestmark = [*requires_desktop(), pytest.mark.timeout(600)]


def _rule(expected: str) -> dict:
    return {"type": "rule", "rules": {"expected": expected}}


TASKS = {
    # the flag file is never made by setup: doing nothing must score 0
    "os/flag": {"id": "flag", "instruction": "Write done into ~/flag.", "related_apps": ["os"], "config": [],
                "evaluator": {"func": "exact_match",
                              "result": {"type": "vm_command_line", "command": "cat ~/flag 2>/dev/null || echo none",
                                         "shell": True},
                              "expected": _rule("done\n")}},
    "os/impossible": {"id": "impossible", "instruction": "Switch on the Bluetooth.", "related_apps": ["os"],
                      "config": [], "evaluator": {"func": "infeasible"}},
    "os/web": {"id": "web", "instruction": "x", "related_apps": ["os"],
               "config": [{"type": "execute", "parameters": {"command": "curl https://example.org/x", "shell": True}}],
               "evaluator": {"func": "infeasible"}},
}
BANNERS = {"id": "banners", "instruction": "Switch to 'Do not disturb' mode.", "related_apps": ["os"],
           "config": [{"type": "execute", "parameters": {
               "command": "gsettings set org.gnome.desktop.notifications show-banners true", "shell": True}}],
           "evaluator": {"func": "exact_match",
                         "result": {"type": "vm_command_line", "shell": True,
                                    "command": "gsettings get org.gnome.desktop.notifications show-banners"},
                         "expected": _rule("false\n")}}


def _task_set(tmp_path, tasks: dict) -> str:
    root = tmp_path / "evaluation_examples"
    names: dict[str, list[str]] = {}
    for key, data in tasks.items():
        domain, task_id = key.split("/")
        path = root / "examples" / domain / f"{task_id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
        names.setdefault(domain, []).append(task_id)
    (root / "test_all.json").write_text(json.dumps(names))
    return str(root)


def _solution(tmp_path, key: str, steps: list[dict]) -> str:
    path = tmp_path / "solutions" / f"{key}.solution.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"steps": steps}))
    return str(tmp_path / "solutions")


def test_a_set_is_checked_idle_without_solutions_and_with_them_from_their_folder(tmp_path, capsys):
    root = _task_set(tmp_path, TASKS)
    solutions = _solution(tmp_path, "os/impossible", [{"action": "terminate", "status": "failure"}])
    out = tmp_path / "check.json"
    assert main(["--tasks-dir", root, "--set", "test_all.json", "--runnable", "--solutions-dir", solutions,
                 "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    by_task = {r["task"]: r for r in results if "task" in r}
    assert by_task["os/flag"] == {**by_task["os/flag"], "ok": True, "has_solution": False, "solution": None,
                                  "nothing": 0.0}
    assert by_task["os/impossible"] == {**by_task["os/impossible"], "ok": True, "has_solution": True,
                                        "solution": 1.0, "nothing": 0.0}
    skipped = [r["skipped"] for r in results if "skipped" in r]
    assert len(skipped) == 1 and "os/web" in skipped[0] and "network" in skipped[0]
    printed = capsys.readouterr().out
    assert "ok   os/flag" in printed and "no solution" in printed
    assert "2/2 tasks check out" in printed and "1 of 1 scripted solutions score 1; 1 skipped" in printed


def test_a_task_solved_wrongly_fails_the_check(tmp_path):
    # an infeasible task the scripted agent claims to have done scores 0: the check must say so (exit 1)
    root = _task_set(tmp_path, {"os/impossible": TASKS["os/impossible"]})
    solutions = _solution(tmp_path, "os/impossible", [{"action": "terminate", "status": "success"}])
    assert main(["--tasks-dir", root, "--set", "test_all.json", "--solutions-dir", solutions]) == 1


@pytest.mark.osworld_apps
def test_ctrl_alt_t_opens_a_terminal_that_solves_a_settings_task(tmp_path, capsys):
    import shutil

    if shutil.which("xterm") is None and shutil.which("x-terminal-emulator") is None:
        pytest.skip("no terminal emulator: bash scripts/setup_gui.sh --osworld-apps")
    if shutil.which("gsettings") is None:
        pytest.skip("gsettings is not installed (Debian's libglib2.0-bin)")
    root = _task_set(tmp_path, {"os/banners": BANNERS})
    solutions = _solution(tmp_path, "os/banners", [
        {"action": "key", "keys": ["ctrl", "alt", "t"]}, {"action": "wait", "time": 2},
        {"action": "type", "text": "gsettings set org.gnome.desktop.notifications show-banners false\n"},
        {"action": "wait", "time": 1}, {"action": "terminate", "status": "success"}])
    assert main(["--tasks-dir", root, "--set", "test_all.json", "--solutions-dir", solutions]) == 0
    assert "solution 1.0 (5 steps)  nothing 0.0" in capsys.readouterr().out
