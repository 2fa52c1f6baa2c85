"""The desktop as OSWorld's tasks assume it: GSettings that keep what is set (the default run), and a task in OSWorld's
format on the real LibreOffice Calc (the `osworld_apps` tier: `bash scripts/setup_gui.sh --osworld-apps` installs the
apps, then `bash scripts/run_tests.sh -m osworld_apps`): its file downloaded from the file cache and opened, the
postconfig saving it with Ctrl+S, compare_table scoring the saved workbook against the expected one from the cache.
Doing nothing scores 0; the end state the task asks for, reached through the keyboard, scores 1."""

from __future__ import annotations

import asyncio
import io
import shutil

import pytest

from slime.agentic.gui.desktop import LocalDesktop
from slime.agentic.gui.file_cache import FileCache
from slime.agentic.gui.tasks import evaluate, run_setup, task_from_dict

from helpers.gui_env import requires_desktop

pytestmark = requires_desktop()

SHEET_URL = "https://files.example.org/osworld/calc/stock.xlsx"
GOLD_URL = "https://files.example.org/osworld/calc/stock_gold.xlsx"
CALC_TASK = {
    "id": "fixture-calc-total",
    "instruction": "In cell A3 of stock.xlsx, compute ten times the quantity in B2 with a formula, then save.",
    "related_apps": ["libreoffice_calc"],
    "config": [
        {"type": "download", "parameters": {"files": [{"url": SHEET_URL, "path": "/home/user/stock.xlsx"}]}},
        {"type": "open", "parameters": {"path": "/home/user/stock.xlsx"}},
    ],
    "evaluator": {
        "postconfig": [
            {"type": "activate_window", "parameters": {"window_name": "stock.xlsx - LibreOffice Calc", "strict": True}},
            {"type": "sleep", "parameters": {"seconds": 0.5}},
            {"type": "execute", "parameters": {"command": ["python", "-c",
                                                           "import pyautogui; pyautogui.hotkey('ctrl', 's')"]}},
            {"type": "sleep", "parameters": {"seconds": 2}},
        ],
        "func": "compare_table",
        "result": {"type": "vm_file", "path": "/home/user/stock.xlsx", "dest": "stock.xlsx"},
        "expected": {"type": "cloud_file", "path": GOLD_URL, "dest": "stock_gold.xlsx"},
        "options": {"rules": [
            {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"},
            {"type": "check_cell", "sheet_idx": 0, "coordinate": "A3", "props": {"value": {"method": "eq", "ref": 40}}},
        ]},
    },
}


def _workbook(rows) -> bytes:
    openpyxl = pytest.importorskip("openpyxl")
    wb = openpyxl.Workbook()
    for row in rows:
        wb.active.append(row)
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def test_gsettings_keep_what_is_set_in_the_desktop(tmp_path):
    if shutil.which("gsettings") is None:
        pytest.skip("gsettings is not installed (Debian's libglib2.0-bin)")

    async def go():
        desktop = await LocalDesktop(base_dir=str(tmp_path)).start()
        try:
            schemas = await desktop.client.execute("gsettings list-schemas", shell=True)
            if "org.gnome.desktop.interface" not in schemas["output"]:
                pytest.skip("the GNOME interface schema is not installed (Debian's gsettings-desktop-schemas)")
            before = await desktop.client.execute("gsettings get org.gnome.desktop.interface text-scaling-factor",
                                                  shell=True)
            done = await desktop.client.execute("gsettings set org.gnome.desktop.interface text-scaling-factor 1.25",
                                                shell=True)
            after = await desktop.client.execute("gsettings get org.gnome.desktop.interface text-scaling-factor",
                                                 shell=True)
            return before, done, after
        finally:
            await desktop.aclose()

    before, done, after = asyncio.run(go())
    assert before["output"].strip() == "1.0"
    assert done["returncode"] == 0
    # read back by another process: the value was kept (the default backend without a D-Bus session forgets it)
    assert after["output"].strip() == "1.25"


@pytest.mark.osworld_apps
def test_a_calc_task_in_osworlds_format_scores_its_end_state(tmp_path):
    if shutil.which("soffice") is None:
        pytest.skip("LibreOffice is not installed: bash scripts/setup_gui.sh --osworld-apps")
    task = task_from_dict(CALC_TASK, domain="libreoffice_calc")
    assert task.unsupported == []
    (tmp_path / "cache" / task.id).mkdir(parents=True)
    cache = FileCache(tmp_path / "cache")
    cache.download_path(task.id, SHEET_URL, "/home/user/stock.xlsx").write_bytes(
        _workbook([["Item", "Qty"], ["pens", 4]]))
    cache.cloud_path(task.id, "stock_gold.xlsx").write_bytes(_workbook([["Item", "Qty"], ["pens", 4], [40]]))

    async def episode(name: str, solve: bool) -> float:
        work = tmp_path / name
        work.mkdir()
        desktop = await LocalDesktop(base_dir=str(work)).start()
        try:
            await run_setup(desktop.client, task.config, task_id=task.id, file_cache=cache, cache_dir=work)
            if solve:  # what an agent would do at the keyboard: go to A3, type the formula, Enter
                code = ("import pyautogui; pyautogui.PAUSE = 0.1; pyautogui.hotkey('ctrl', 'Home'); "
                        "pyautogui.press('down'); pyautogui.press('down'); pyautogui.write('=B2*10\\n')")
                result = await desktop.client.execute(["python", "-c", code])
                assert result["returncode"] == 0, result
            evaluation = await evaluate(desktop.client, task, "DONE", file_cache=cache, cache_dir=work)
            return evaluation.score
        finally:
            await desktop.aclose()

    assert asyncio.run(episode("idle", solve=False)) == 0.0
    assert asyncio.run(episode("solved", solve=True)) == 1.0
