"""The GUI policy's actions (computer_use -> pyautogui code), the observation helpers, the task format and metrics,
and the scripted solutions' target lookup: pure, no desktop."""

from __future__ import annotations

import asyncio
import json
import types

import pytest

from slime.agentic.gui.actions import ACTIONS, ActionError, key_name, parse_response, program, to_step
from slime.agentic.gui.observation import text_view
from slime.models.vision import smart_resize
from slime.agentic.gui.scripted import SolutionError, locate, resolve
from slime.agentic.gui.vm_server import ocr_elements
from slime.agentic.gui.tasks import (
    TASKS_DIR,
    TaskFormatError,
    evaluate,
    find_task,
    load_tasks,
    task_from_dict,
)

SCREEN = (1280, 720)


def call(arguments: dict, action_line: str = "Action: do it") -> str:
    return f"{action_line}\n<tool_call>\n{json.dumps({'name': 'computer_use', 'arguments': arguments})}\n</tool_call>"


def test_a_response_is_one_action_line_and_exactly_one_tool_call():
    line, args = parse_response(call({"action": "left_click", "coordinate": [10, 20]}, "Action: click the box"))
    assert line == "click the box" and args == {"action": "left_click", "coordinate": [10, 20]}
    stringly = '<tool_call>{"name": "computer_use", "arguments": "{\\"action\\": \\"wait\\"}"}</tool_call>'
    assert parse_response(stringly)[1] == {"action": "wait"}
    for bad, why in [("Action: nothing", "no <tool_call>"), (call({"action": "wait"}) * 2, "2 tool calls"),
                     ("<tool_call>{nope}</tool_call>", "not valid JSON"),
                     ('<tool_call>{"name": "bash", "arguments": {}}</tool_call>', "computer_use"),
                     ('<tool_call>{"name": "computer_use", "arguments": [1]}</tool_call>', "must be a JSON object")]:
        with pytest.raises(ActionError, match=why):
            parse_response(bad)


def test_relative_coordinates_map_onto_the_screen_and_every_action_makes_code():
    assert to_step({"action": "left_click", "coordinate": [0, 0]}, SCREEN).code == "pyautogui.click(0, 0)"
    assert to_step({"action": "left_click", "coordinate": [999, 999]}, SCREEN).code == "pyautogui.click(1279, 719)"
    assert to_step({"action": "double_click", "coordinate": [500, 500]}, SCREEN).code == "pyautogui.doubleClick(641, 360)"
    assert to_step({"action": "left_click", "coordinate": [64, 36]}, SCREEN, "absolute").code == "pyautogui.click(64, 36)"
    samples = {
        "key": {"keys": ["ctrl", "s"]}, "type": {"text": "hi"}, "mouse_move": {"coordinate": [1, 1]},
        "left_click": {"coordinate": [1, 1]}, "left_click_drag": {"coordinate": [9, 9], "start_coordinate": [1, 1]},
        "right_click": {"coordinate": [1, 1]}, "middle_click": {"coordinate": [1, 1]},
        "double_click": {"coordinate": [1, 1]}, "triple_click": {"coordinate": [1, 1]},
        "scroll": {"pixels": -3, "coordinate": [5, 5]}, "hscroll": {"pixels": 2},
    }
    for action in ACTIONS:
        step = to_step({"action": action, **samples.get(action, {"status": "success"})}, SCREEN)
        if action in samples:  # upstream made no code for triple_click and hscroll
            compile(program(step.code), "<action>", "exec")
            assert step.special is None
    assert to_step({"action": "triple_click", "coordinate": [1, 1]}, SCREEN).code.startswith("pyautogui.tripleClick(")
    assert to_step({"action": "hscroll", "pixels": 2}, SCREEN).code == "pyautogui.hscroll(2)"
    assert to_step({"action": "key", "keys": ["Control", "Return"]}, SCREEN).code == "pyautogui.hotkey('ctrl', 'enter')"
    assert to_step({"action": "key", "keys": ["A"]}, SCREEN).code == "pyautogui.press('a')"


def test_typed_text_cannot_break_or_inject_code():
    nasty = "it's \"quoted\"\\n'); import os; os.system('x') #\nnext <line>"
    code = to_step({"action": "type", "text": nasty}, SCREEN).code
    typed = []
    fake = types.SimpleNamespace(write=lambda text, interval: typed.append(text),
                                 press=lambda key: typed.append({"enter": "\n"}[key]),
                                 hotkey=lambda *keys: typed.append({("shift", ","): "<"}[keys]))
    scope = {"pyautogui": fake}
    exec(compile(code, "<action>", "exec"), scope)  # the code does nothing but type the text, exactly
    assert "".join(typed) == nasty and set(scope) == {"pyautogui", "__builtins__"}
    with pytest.raises(ActionError, match="only ASCII"):
        to_step({"action": "type", "text": "café"}, SCREEN)


def test_specials_and_bad_arguments():
    assert to_step({"action": "terminate", "status": "success"}, SCREEN).special == "DONE"
    assert to_step({"action": "terminate", "status": "failure"}, SCREEN).special == "FAIL"
    wait = to_step({"action": "wait", "time": 500}, SCREEN)
    assert wait.special == "WAIT" and wait.wait_s == 30.0
    for args, why in [({"action": "fly"}, "unknown action"), ({"action": "left_click"}, "needs 'coordinate'"),
                      ({"action": "left_click", "coordinate": [1000, 5]}, "outside 0-999"),
                      ({"action": "left_click", "coordinate": [1, True]}, "must be a number"),
                      ({"action": "key", "keys": ["ctrl", "rm -rf"]}, "unknown key"),
                      ({"action": "key", "keys": []}, "list of key names"),
                      ({"action": "terminate", "status": "maybe"}, "success' or 'failure"),
                      ({"action": "scroll"}, "pixels"),
                      # issue 37: JSON allows Infinity and NaN, and integers of any length; each raised out of the
                      # provider (OverflowError, ValueError) instead of being refused
                      ({"action": "scroll", "pixels": float("inf")}, "finite number"),
                      ({"action": "scroll", "pixels": float("nan")}, "finite number"),
                      ({"action": "left_click", "coordinate": [10 ** 400, 5]}, "finite number"),
                      ({"action": "wait", "time": float("nan")}, "finite number"),  # NaN < 0 is False: it passed
                      ({"action": "wait", "time": 10 ** 400}, "finite number"),
                      ({"action": "scroll", "pixels": 10 ** 400}, "finite number")]:
        with pytest.raises(ActionError, match=why):
            to_step(args, SCREEN)
    assert to_step({"action": "scroll", "pixels": 10 ** 9}, SCREEN).code == "pyautogui.scroll(50)"  # as wait: bounded
    assert to_step({"action": "scroll", "pixels": -1e300}, SCREEN).code == "pyautogui.scroll(-50)"
    assert key_name("esc") == "escape" and key_name("F5") == "f5" and key_name(";") == ";"


def test_smart_resize_is_qwens_rule_for_the_gui_screens():
    qwen3 = dict(factor=32, min_pixels=4 * 32 * 32, max_pixels=16 * 16 * 4 * 12800)  # upstream's GUI settings
    assert smart_resize(1080, 1920, **qwen3) == (1088, 1920)
    assert smart_resize(720, 1280, **qwen3) == (704, 1280)
    assert smart_resize(1080, 1920, factor=28, max_pixels=16 * 16 * 4 * 12800) == (1092, 1932)
    h, w = smart_resize(4000, 6000, factor=32, max_pixels=1_000_000)
    assert h * w <= 1_000_000 and h % 32 == 0 and w % 32 == 0
    with pytest.raises(ValueError):
        smart_resize(0, 10)


def test_the_text_view_gives_line_centres_in_policy_coordinates_and_targets_resolve():
    xml = ('<desktop-frame source="ocr"><text x="0" y="700" w="100" h="20" name="Bottom line"/>'
           '<text x="630" y="10" w="20" h="20" name="Save"/></desktop-frame>')
    view = text_view(xml, SCREEN)
    assert view.splitlines() == ["Save [500, 28]", "Bottom line [39, 985]"]
    assert text_view("not xml", SCREEN) == "" and text_view("", SCREEN) == ""
    assert locate(view, "save") == (500, 28)
    assert resolve({"action": "left_click", "target": "Bottom", "offset": [100, -5]}, view) == \
        {"action": "left_click", "coordinate": [139, 980]}
    with pytest.raises(SolutionError, match="no text 'Cancel'"):
        locate(view, "Cancel")


def test_a_target_prefers_the_line_that_reads_it_over_one_that_contains_it():
    view = "Volume [50, 386]\n100 [320, 386]\nFont size [55, 663]\n10 [145, 663]"
    assert locate(view, "10") == (145, 663)  # the font size's own line, not the volume's 100 above it
    assert locate(view, "volu") == (50, 386)


def tsv(*words):
    """Tesseract TSV rows for (line, x, y, w, h, text, confidence) words."""
    head = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext"
    return "\n".join([head] + [f"5\t1\t{line}\t1\t1\t{k}\t{x}\t{y}\t{w}\t{h}\t{conf}\t{text}"
                               for k, (line, x, y, w, h, text, conf) in enumerate(words)])


def test_ocr_elements_split_a_label_from_the_field_beside_it_and_scale_boxes_back():
    # words as tesseract reads the settings dialog at 2x: the label, then the entry's text with its border as "|"
    rows = tsv((2, 64, 124, 126, 36, "Display", 96), (2, 208, 132, 96, 20, "name", 96),
               (2, 350, 126, 74, 26, "|Sam", 95), (2, 442, 124, 114, 28, "Weber", 95),
               (3, 60, 204, 168, 34, "Language", 90), (3, 300, 204, 20, 30, "~~", 12))
    assert ocr_elements(rows, scale=2) == [(32, 62, 120, 18, "Display name"), (175, 62, 103, 14, "Sam Weber"),
                                           (30, 102, 84, 17, "Language")]
    assert ocr_elements(rows.splitlines()[0]) == []


def task(**evaluator):
    return task_from_dict({"id": "t", "instruction": "do it", "config": [], "evaluator": evaluator})


def test_task_format_errors_name_the_field():
    for data, why in [({"instruction": "x", "evaluator": {"func": "infeasible"}}, "'id'"),
                      ({"id": "t", "instruction": "x", "evaluator": {"func": []}}, "must name a metric"),
                      ({"id": "t", "instruction": "x", "evaluator": {"func": "exact_match", "result": "x"}},
                       "must be getters"),
                      ({"id": "t", "instruction": "x", "config": [{"type": "teleport"}],
                        "evaluator": {"func": "infeasible"}},
                       "config\\[0\\]: type 'teleport' is not an OSWorld setup step"),
                      ({"id": "t", "instruction": "x", "evaluator": {"func": "infeasible", "postconfig": [{"type": "x"}]}},
                       "postconfig\\[0\\]")]:
        with pytest.raises(TaskFormatError, match=why):
            task_from_dict(data)


def test_osworld_parts_not_implemented_here_load_and_say_why_the_task_cannot_run():
    t = task_from_dict({"id": "t", "instruction": "x",
                        "config": [{"type": "download", "parameters": {"files": []}},
                                   {"type": "googledrive", "parameters": {"settings_file": "x"}}],
                        "evaluator": {"func": ["compare_table", "exact_match", "compare_audios"],
                                      "result": [{"type": "vm_file", "path": "~/a.xlsx", "dest": "a.xlsx"},
                                                 {"type": "bookmarks"}, {"type": "vm_file", "path": "~/a.mp3"}],
                                      "expected": [{"type": "cloud_file", "path": "https://x/a.xlsx", "dest": "g"},
                                                   {"type": "rule", "rules": {"expected": "x"}}, None],
                                      "options": [{"rules": [{"type": "sheet_data", "sheet_idx0": 0,
                                                              "sheet_idx1": "EI0"}, {"type": "style"}]}, {}, {}]}})
    assert t.unsupported == ["config step googledrive: prepares a Google Drive account (network)",
                             "metric 'compare_audios' is not implemented here",
                             "metric 'compare_table': rule 'style' is not implemented here",
                             "result getter 'bookmarks' is not implemented here"]
    pptx = task(func="compare_pptx_files", result={"type": "vm_file", "path": "~/a.pptx"},
                expected={"type": "cloud_file", "path": "https://x/a.pptx", "dest": "a.pptx"},
                options={"examine_shape": False, "examine_sparkles": True})
    assert pptx.unsupported == ["metric 'compare_pptx_files': option 'examine_sparkles' is not implemented here"]
    assert task(func="infeasible").unsupported == []


def test_fail_semantics_without_upstreams_leak():
    infeasible = task(func="infeasible")

    def score(t, last):  # these paths never reach the desktop: no client needed
        return asyncio.run(evaluate(None, t, last)).score

    assert score(infeasible, "FAIL") == 1.0
    assert score(infeasible, None) == 0.0  # cut off (out of steps): not a FAIL, unlike upstream
    assert score(infeasible, "DONE") == 0.0
    feasible = task(func="exact_match", result={"type": "vm_file", "path": "~/x"}, expected={"rules": {"expected": "1"}})
    assert score(feasible, "FAIL") == 0.0


def test_the_shipped_tasks_load_and_each_has_a_solution():
    tasks = load_tasks(TASKS_DIR)
    assert tasks and len({t.key for t in tasks}) == len(tasks)
    for t in tasks:
        assert t.path.with_name(f"{t.id}.solution.json").is_file(), t.key
    first = tasks[0]
    assert find_task(first.key).id == first.id
    with pytest.raises(KeyError):
        find_task("notes/../../etc")
