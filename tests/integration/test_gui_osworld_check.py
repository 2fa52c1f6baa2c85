"""`python -m slime.agentic.gui.check` over a task set in OSWorld's layout (``evaluation_examples/examples/<domain>/
<id>.json`` and a set file): tasks without a scripted solution are checked idle (setup and evaluator run, doing
nothing scores 0), solutions come from a folder of their own (``--solutions-dir``), and ``--runnable`` skips, with
the reason, what cannot run here. In the `osworld_apps` tier (a terminal installed): Ctrl+Alt+T opens a terminal as on
OSWorld's image, and a settings task in OSWorld's form is solved by typing into it."""

from __future__ import annotations

import asyncio
import json

import pytest

from slime.agentic.gui.check import main
from slime.agentic.gui.desktop import LocalDesktop

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
# a window that takes the keyboard focus itself (as VLC's first-run dialog did): the terminal must still get the keys
FOCUS_TAKER = "import tkinter as tk; r = tk.Tk(); r.title('dialog'); r.after(200, r.focus_force); r.mainloop()"
BANNERS = {"id": "banners", "instruction": "Switch to 'Do not disturb' mode.", "related_apps": ["os"],
           "config": [{"type": "execute", "parameters": {
               "command": "gsettings set org.gnome.desktop.notifications show-banners true", "shell": True}},
                      {"type": "launch", "parameters": {"command": ["python3", "-c", FOCUS_TAKER]}},
                      {"type": "sleep", "parameters": {"seconds": 1}}],
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
    args = ["--tasks-dir", root, "--set", "test_all.json", "--solutions-dir", solutions]
    assert main([*args, "--terminal-shortcut"]) == 0
    assert "solution 1.0 (5 steps)  nothing 0.0" in capsys.readouterr().out
    # off by default: the agent has no shell, the keys open nothing and the task stays unsolved
    assert main(args) == 1
    assert "solution 0.0 (5 steps)" in capsys.readouterr().out


def test_a_module_planted_in_the_home_does_not_answer_for_the_evaluators_python(tmp_path):
    async def go():
        desktop = await LocalDesktop(base_dir=str(tmp_path)).start()
        try:
            await desktop.client.upload("/home/user/json.py", b"def dumps(value):\n    return 'forged'\n")
            return await desktop.client.execute(["python", "-c", "import json; print(json.dumps([1]))"])
        finally:
            await desktop.aclose()

    result = asyncio.run(go())
    assert result["output"] == "[1]\n", result


def test_sudo_in_the_desktop_checks_the_password_and_never_gives_root(tmp_path):
    async def go():
        desktop = await LocalDesktop(base_dir=str(tmp_path), client_password="s3cret").start()
        try:
            run = desktop.client.execute
            return [await run(cmd, shell=True) for cmd in (
                "echo s3cret | sudo -S mkdir ~/made && ls -d ~/made",  # what OSWorld's setups do
                "echo wrong | sudo -S mkdir ~/other",
                "sudo true < /dev/null",  # no -S and no terminal: refused, as sudo does
                "echo s3cret | sudo -S id -u; id -u",
                "echo s3cret | sudo -S touch /etc/owned")]
        finally:
            await desktop.aclose()

    made, wrong, no_tty, uid, root_only = asyncio.run(go())
    assert made["returncode"] == 0 and made["output"].strip() == "/home/user/made"
    assert wrong["returncode"] != 0 and "incorrect password" in wrong["error"]
    assert no_tty["returncode"] != 0 and "terminal is required" in no_tty["error"]
    as_sudo, as_user = uid["output"].split()
    assert as_sudo == as_user != "0"
    assert root_only["returncode"] != 0


def test_chrome_tabs_open_and_are_read_through_its_devtools_port(tmp_path):
    """OSWorld's chrome_open_tabs setup step and its Chrome getters on local pages: the tabs opened are the URLs
    (the fresh browser's blank tab closed), the active tab is the one the window shows, with its document; a closed
    tab is gone."""
    import shutil

    from slime.agentic.gui.evaluators import GETTERS, METRICS, EvalEnv
    from slime.agentic.gui.setup_controller import SetupController

    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed: bash scripts/setup_gui.sh")
    a, b = "file:///home/user/a.html?q=1&lang=en", "file:///home/user/b.html"

    async def go():
        desktop = await LocalDesktop(base_dir=str(tmp_path)).start()
        try:
            client = desktop.client
            await client.upload("/home/user/a.html", b"<title>Page A</title><p>alpha text</p>")
            await client.upload("/home/user/b.html", b"<title>Page B</title><p>beta</p>")
            setup = SetupController(client, task_id="t")
            await setup.setup([{"type": "chrome_open_tabs", "parameters": {"urls_to_open": [b, a]}}])
            await asyncio.sleep(1)
            (tmp_path / "cache").mkdir()
            env = EvalEnv(client=client, cache_dir=tmp_path / "cache")
            got = {name: await GETTERS[name](env, config) for name, config in (
                ("open_tabs_info", {}), ("active_tab_info", {}), ("active_url_from_accessTree", {}),
                ("active_tab_url_parse", {"goto_prefix": "", "parse_keys": ["q", "lang"], "replace": {"q": "query"}}))}
            await setup.setup([{"type": "chrome_close_tabs", "parameters": {"urls_to_close": [b]}}])
            got["after_close"] = await GETTERS["open_tabs_info"](env, {})
            return got, setup.warnings
        finally:
            await desktop.aclose()

    got, warnings = asyncio.run(go())
    assert warnings == []
    assert sorted(t["url"] for t in got["open_tabs_info"]) == [a, b]  # no blank tab left
    assert METRICS["is_expected_tabs"](got["open_tabs_info"], {"type": "url", "urls": [a, b]}) == 1.0
    active = got["active_tab_info"]
    assert (active["title"], active["url"]) == ("Page A", a) and "alpha text" in active["content"]
    assert got["active_url_from_accessTree"] == "https://" + a  # OSWorld's default prefix before the bar's text
    assert got["active_tab_url_parse"] == {"lang": "en", "query": "1"}
    assert [t["url"] for t in got["after_close"]] == [a]


def test_the_app_settings_getters_copy_the_apps_files_from_the_desktop(tmp_path):
    from slime.agentic.gui.evaluators import GETTERS, METRICS, EvalEnv

    async def go():
        desktop = await LocalDesktop(base_dir=str(tmp_path)).start()
        try:
            (tmp_path / "cache").mkdir()
            env = EvalEnv(client=desktop.client, cache_dir=tmp_path / "cache")
            seeded = await GETTERS["vlc_config"](env, {"dest": "vlcrc-seeded"})  # the seeded preferences
            missing = await GETTERS["gimp_config_file"](env, {"file_name": "gimprc", "dest": "gimprc"})
            await desktop.client.execute("printf 'qt-bgcone=0\\n' >> ~/.config/vlc/vlcrc && mkdir -p "
                                         "~/.config/GIMP/2.10 && echo '(undo-levels 100)' > ~/.config/GIMP/2.10/gimprc",
                                         shell=True)
            vlcrc = await GETTERS["vlc_config"](env, {"dest": "vlcrc"})
            gimprc = await GETTERS["gimp_config_file"](env, {"file_name": "gimprc", "dest": "gimprc"})
            return seeded, missing, vlcrc, gimprc
        finally:
            await desktop.aclose()

    seeded, missing, vlcrc, gimprc = asyncio.run(go())
    assert missing is None  # GIMP never ran: no file, and its metric scores 0
    assert METRICS["check_qt_bgcone"](seeded, {"expected_qt_bgcone": 0}) == 0.0
    assert vlcrc == str(tmp_path / "cache" / "vlcrc")
    assert METRICS["check_qt_bgcone"](vlcrc, {"expected_qt_bgcone": 0}) == 1.0
    assert METRICS["check_config_status"](gimprc, {"key": "undo-levels", "value": "100"}) == 1.0


@pytest.mark.osworld_apps
def test_the_desktop_has_a_sound_sink_at_half_volume(tmp_path):
    import shutil

    if shutil.which("pactl") is None or shutil.which("pulseaudio") is None:
        pytest.skip("PulseAudio is not installed: bash scripts/setup_gui.sh --osworld-apps")
    volume = "pactl list sinks | grep '^[[:space:]]Volume:' | head -n 1 | awk '{print $5}' | sed 's/%//g'"  # OSWorld's

    async def go():
        desktop = await LocalDesktop(base_dir=str(tmp_path)).start()
        try:
            run = desktop.client.execute
            before = await run(f"pulseaudio --start\n{volume}", shell=True)
            await run("pactl set-sink-volume @DEFAULT_SINK@ 100%", shell=True)
            after = await run(volume, shell=True)
            return before["output"], after["output"]
        finally:
            await desktop.aclose()

    assert asyncio.run(go()) == ("50\n", "100\n")
