"""Local GUI desktops for real: Xvfb, Tk apps and chromium in a bubblewrap sandbox per lease, driven through
OSWorld's VM server contract.

An episode of a shipped task through a real pool server of the `gui` provider (screenshot and text view, the
scripted solution's actions, the evaluator, 409 after terminate, nothing left after close); two desktops do not see
each other's windows, files or /tmp; a hung command is killed with what it started at its timeout; a closed desktop
leaves no Xvfb, app or browser process. Skipped where the sandbox or the desktop tools are missing
(scripts/setup_gui.sh installs them)."""

from __future__ import annotations

import asyncio
import base64
import io
import shutil

import pytest

from slime.agentic import sandbox as sb
from slime.agentic.env_service.client import EnvClient, EnvServiceError
from slime.agentic.env_service.launch import PoolServerProcess
from slime.agentic.env_service.settings import PoolSettings
from slime.agentic.gui.desktop import CHROMIUM, LocalDesktop
from slime.agentic.gui.scripted import load_solution, resolve
from slime.agentic.gui.tasks import find_task
from slime.agentic.gui.vm_client import VMError

from helpers.gui_env import requires_desktop

pytestmark = requires_desktop()
TASK = "notes/append-line"


def test_a_pool_server_serves_an_episode_of_a_shipped_task(tmp_path):
    from PIL import Image

    task = find_task(TASK)
    steps = load_solution(task)

    async def go(url):
        async with EnvClient(url) as env:
            lease = (await env.allocate(TASK))["lease_id"]
            try:
                first = await env.reset(lease, {"task": TASK})
                refused = await env.exec_tool(lease, "computer_use", {"action": "fly"})
                observation, replies = first, []
                for step in steps:
                    observation = await env.exec_tool(lease, "computer_use", resolve(step, observation["text_view"]))
                    replies.append(observation)
                with pytest.raises(EnvServiceError) as after:
                    await env.exec_tool(lease, "computer_use", {"action": "wait"})
                evaluation = await env.evaluate(lease)
            finally:
                await env.close(lease)
            return (first, refused, replies, after.value, evaluation,
                    (await env.status())["pool"]["total_active_runs"])

    with PoolServerProcess(PoolSettings(provider="gui", state_dir=str(tmp_path / "pool"))) as pool:
        first, refused, replies, after, evaluation, active = asyncio.run(go(pool.url))
    image = Image.open(io.BytesIO(base64.b64decode(first["screenshot_b64"])))
    assert image.size == (1280, 720) and first["screen"] == [1280, 720]
    assert "bread" in first["text_view"] and first["instruction"] == task.instruction
    assert [t["function"]["name"] for t in first["tool_schemas"]] == ["computer_use", "observe"]
    # a refused call's code comes through the pool server's HTTP answer (the agent loop decides on it)
    assert (refused["error"], refused["error_code"]) == (True, "REFUSED") and "screenshot_b64" not in refused
    assert all(not r.get("error") for r in replies) and replies[-1]["done"] is True
    assert after.status == 409 and after.code == "EPISODE_ENDED"
    assert evaluation["score"] == 1.0 and evaluation["acc"] == 1.0 and evaluation["last_action"] == "DONE"
    assert active == 0


def test_two_desktops_do_not_see_each_others_windows_files_or_tmp(tmp_path):
    async def go():
        a = await LocalDesktop(base_dir=str(tmp_path)).start()
        b = await LocalDesktop(base_dir=str(tmp_path)).start()
        try:
            await a.client.upload("~/secret.txt", b"only a")
            await a.client.execute(["bash", "-c", "echo a > /tmp/a-was-here"])
            await a.client.launch(["python", "/opt/slime-gui/apps/notes.py", "~/secret.txt"])
            seen_in_a = await wait_for_window(a, "Notes - secret.txt")
            in_b = await b.client.execute(["xdotool", "search", "--name", "Notes"])
            return (seen_in_a, in_b["output"], await b.client.get_file("~/secret.txt"),
                    (await b.client.execute(["ls", "/tmp"]))["output"], a.box.uid, b.box.uid)
        finally:
            await a.aclose()
            await b.aclose()

    seen_in_a, windows_in_b, file_in_b, tmp_in_b, uid_a, uid_b = asyncio.run(go())
    assert seen_in_a and windows_in_b.strip() == "" and file_in_b is None
    assert "a-was-here" not in tmp_in_b and uid_a != uid_b


async def wait_for_window(desktop: LocalDesktop, name: str, timeout: float = 60.0) -> bool:
    for _ in range(int(timeout / 0.25)):
        if (await desktop.client.execute(["xdotool", "search", "--onlyvisible", "--name", name]))["output"].strip():
            return True
        await asyncio.sleep(0.25)
    return False


def test_a_hung_command_is_killed_and_a_closed_desktop_leaves_no_process(tmp_path):
    browser = shutil.which("chromium") is not None

    async def go():
        desktop = await LocalDesktop(base_dir=str(tmp_path)).start()
        uid = desktop.box.uid
        try:
            with pytest.raises(VMError, match="did not finish within 1 s"):
                await desktop.client.execute(["bash", "-c", "sleep 300 & sleep 301"], timeout=1)
            left = (await desktop.client.execute(["bash", "-c", "ps -eo args | grep -c '^sleep 30' || true"]))["output"]
            await desktop.client.launch(["python", "/opt/slime-gui/apps/notes.py", "~/a.txt"])
            if browser:
                await desktop.client.launch([*CHROMIUM, "--app=data:text/html,<title>Browser up</title>hi"])
            up = [await wait_for_window(desktop, "Notes - a.txt")] + \
                ([await wait_for_window(desktop, "Browser up")] if browser else [])
            running = {name for _, _, name in sb.uid_processes([uid])}
        finally:
            await desktop.aclose()
        return left, up, running, sb.uid_processes([uid])

    left, up, running, after = asyncio.run(go())
    assert left.strip() == "0"  # the timed-out command's whole process group went
    assert all(up) and "Xvfb" in running and ("chromium" in running or not browser)
    assert after == []


def test_the_host_reaches_the_desktop_through_a_socket_no_agent_can_replace(tmp_path):
    """Issue 37: the host made the listening socket in a directory of its own (root's 0700, not in the sandbox) and
    the server inherited it. An agent that looks for it, or plants a socket and a symlink where the old layout had
    them, changes nothing the host connects to; the server's own descriptor is not inherited by the apps."""
    import os
    import stat

    async def go():
        desktop = await LocalDesktop(base_dir=str(tmp_path)).start()
        try:
            probe = await desktop.client.execute(["bash", "-c",
                                                  "ls -la /run/slime-gui 2>&1; mkdir -p /tmp/x && ln -sf /run/docker.sock "
                                                  "/tmp/x/vm.sock; ls -l /proc/self/fd | grep -c socket || true"])
            st = os.stat(desktop.socket_dir)
            shot = await desktop.client.screenshot()
            return probe["output"], st, shot, desktop.box.uid
        finally:
            await desktop.aclose()

    output, st, shot, uid = asyncio.run(go())
    assert "No such file or directory" in output  # nothing of the host's socket directory is inside
    assert output.strip().splitlines()[-1] == "0"  # a command the server starts holds no socket of the server's
    assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700 and uid != 0
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"  # and the host still reaches its desktop


def test_the_text_view_reads_field_values_apart_from_their_labels_and_a_hovered_button(tmp_path):
    """What a text policy must be able to read (gui-rl/README.md, "Verification"): the settings dialog's display name
    and font size each as an element of their own (the entry's border once glued the name to its label), and the
    file manager's New Folder button still there with the pointer on it after a click (Tk drew it pale)."""
    import json

    from slime.agentic.gui.observation import parse_view_line, text_view

    names = ["Chen Silva", "Jonas Novak", "Sam Lund"]  # the three that read wrong before

    async def view(desktop) -> list[str]:
        xml = await desktop.client.accessibility()
        return [parse_view_line(line)[0] for line in text_view(xml, await desktop.client.screen_size()).splitlines()]

    async def go():
        desktop = await LocalDesktop(base_dir=str(tmp_path)).start()
        seen = []
        try:
            for k, name in enumerate(names):
                path = f"~/s{k}.json"
                await desktop.client.upload(path, json.dumps({"display_name": name, "font_size": 10,
                                                              "volume": 100}).encode())
                await desktop.client.launch(["python", "/opt/slime-gui/apps/settings.py", path])
                assert await wait_for_window(desktop, "Demo Settings")
                seen.append(await view(desktop))
                await desktop.client.close_window("Demo Settings")
                for _ in range(40):  # until it has gone: the next dialog opens where this one was
                    if not (await desktop.client.execute(["xdotool", "search", "--onlyvisible", "--name",
                                                          "Demo Settings"]))["output"].strip():
                        break
                    await asyncio.sleep(0.25)
            await desktop.client.execute(["mkdir", "-p", "docs"])
            await desktop.client.launch(["python", "/opt/slime-gui/apps/files.py", "~/docs"])
            assert await wait_for_window(desktop, "Files - docs")
            button = next(line for line in (await desktop.client.accessibility()).splitlines() if "New Folder" in line)
            x, y, w, h = (float(button.split(f'{k}="')[1].split('"')[0]) for k in ("x", "y", "w", "h"))
            await desktop.client.execute(["xdotool", "mousemove", str(int(x + w / 2)), str(int(y + h / 2)), "click", "1"])
            await asyncio.sleep(0.5)  # the name bar opens
            await desktop.client.execute(["xdotool", "type", "--delay", "20", "photos"])
            await desktop.client.execute(["xdotool", "key", "Return"])
            await asyncio.sleep(0.5)
            after = await view(desktop)
        finally:
            await desktop.aclose()
        return seen, after

    seen, after = asyncio.run(go())
    for name, lines in zip(names, seen):
        assert name in lines and "Display name" in lines, lines
        assert "10" in lines and "100" in lines  # the font size apart from the volume that contains it
    assert "photos/" in after and "New Folder" in after, after
