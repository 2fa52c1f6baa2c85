"""OSWorld's setup semantics and evaluators on a real local desktop: failed launches, exit statuses and window
activations are logged and the setup goes on; placeholders become the desktop's values; a download comes from the
file cache laid out as OSWorld's (and a file it lacks stops the setup naming the file and its URL); a command's
saved output is a cache_file; `until` repeats a command; vm_file gives a path; a cloud_file comes from the cache.
Skipped where the sandbox or the desktop tools are missing (scripts/setup_gui.sh installs them)."""

from __future__ import annotations

import asyncio
import json

import pytest

from slime.agentic.gui.desktop import LocalDesktop
from slime.agentic.gui.file_cache import FileCache
from slime.agentic.gui.setup_controller import SetupError
from slime.agentic.gui.tasks import evaluate, run_setup, task_from_dict

from helpers.gui_env import requires_desktop

pytestmark = requires_desktop()
REPORT_URL = "https://files.example.org/osworld/report.txt"
GOLD_URL = "https://files.example.org/osworld/report-gold.txt"
SETTINGS = {"editor.wordWrapColumn": 100, "editor": {"tabSize": 2}}

TASK = {
    "id": "fixture-osworld-semantics",
    "instruction": "Nothing to do: the setup leaves the desktop in the expected state.",
    "config": [
        {"type": "launch", "parameters": {"command": ["/no/such/app"]}},
        {"type": "execute", "parameters": {"command": ["bash", "-c", "exit 3"]}},
        {"type": "activate_window", "parameters": {"window_name": "No such window"}},
        {"type": "download", "parameters": {"files": [{"url": REPORT_URL, "path": "~/report.txt"}]}},
        {"type": "execute", "parameters": {"command": "echo {SCREEN_WIDTH}x{SCREEN_HEIGHT} {SCREEN_WIDTH_HALF} "
                                                      "{SCREEN_HEIGHT_HALF} {CLIENT_PASSWORD} > ~/facts.txt",
                                           "shell": True}},
        {"type": "command", "parameters": {"command": "cat ~/report.txt", "shell": True, "stdout": "report-copy.txt"}},
        {"type": "upload_file",
         "parameters": {"files": [{"path": "~/settings.json", "content": json.dumps(SETTINGS)}]}},
        {"type": "execute", "parameters": {"command": "echo run >> ~/runs.txt; test $(wc -l < ~/runs.txt) -ge 3",
                                           "shell": True, "until": {"returncode": 0}}},
    ],
    "evaluator": {
        "func": ["compare_text_file", "exact_match", "check_json_settings", "compare_text_file"],
        "result": [{"type": "vm_file", "path": "~/report.txt", "dest": "report.txt"},
                   {"type": "vm_command_line", "command": "cat ~/facts.txt", "shell": True},
                   {"type": "vm_file", "path": "~/settings.json", "dest": "settings.json"},
                   {"type": "cache_file", "path": "report-copy.txt"}],
        "expected": [{"type": "cloud_file", "path": GOLD_URL, "dest": "report-gold.txt"},
                     {"type": "rule", "rules": {"expected": "FACTS"}},
                     {"type": "rule", "rules": {"expected": {"editor.wordWrapColumn": 100}}},
                     {"type": "cloud_file", "path": GOLD_URL, "dest": "report-gold.txt"}],
        "conj": "and",
    },
}


def test_osworld_setup_semantics_and_evaluators_on_a_real_desktop(tmp_path):
    cache = FileCache(tmp_path)
    task_id = TASK["id"]
    (tmp_path / task_id).mkdir()
    cache.download_path(task_id, REPORT_URL, "~/report.txt").write_text("quarterly numbers\n")
    cache.cloud_path(task_id, "report-gold.txt").write_text("quarterly numbers\n")
    episode = tmp_path / "episode"
    episode.mkdir()

    async def go():
        desktop = await LocalDesktop(base_dir=str(tmp_path)).start()
        try:
            width, height = await desktop.client.screen_size()
            facts = f"{width}x{height} {width // 2} {height // 2} password\n"
            data = json.loads(json.dumps(TASK).replace("FACTS", facts.replace("\n", "\\n")))
            task = task_from_dict(data, domain="fixtures")
            controller = await run_setup(desktop.client, task.config, task_id=task_id, file_cache=cache,
                                         cache_dir=episode)
            runs = await desktop.client.get_file("~/runs.txt")
            solved = await evaluate(desktop.client, task, "DONE", file_cache=cache, cache_dir=episode)
            await desktop.client.upload("~/report.txt", b"quarterly numbers, changed\n")
            changed = await evaluate(desktop.client, task, "DONE", file_cache=cache, cache_dir=episode)
            missing = task_from_dict({**data, "config": [{"type": "download", "parameters": {
                "files": [{"url": "https://files.example.org/other.xlsx", "path": "~/other.xlsx"}]}}]})
            with pytest.raises(SetupError, match="setup step 0 \\(download\\) failed: the file cache has no .* "
                                                 "\\(it stands for https://files.example.org/other.xlsx\\)"):
                await run_setup(desktop.client, missing.config, task_id=task_id, file_cache=cache, cache_dir=episode)
            return controller.warnings, runs, solved, changed
        finally:
            await desktop.aclose()

    warnings, runs, solved, changed = asyncio.run(go())
    assert len(warnings) == 5 and "launch" in warnings[0] and "exited 3" in warnings[1], warnings
    assert "activate_window" in warnings[2] and all("exited 1" in w for w in warnings[3:])
    assert runs == b"run\nrun\nrun\n"  # `until` repeated it until its exit status was 0
    assert (solved.score, solved.parts) == (1.0, (1.0, 1.0, 1.0, 1.0)), solved
    assert changed.score == 0.0 and changed.parts == (0.0,) and "compare_text_file" in changed.reason
