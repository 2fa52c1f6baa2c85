"""OSWorld's metrics as OSWorld computes them, each on a correct and an incorrect state (files written here), and
the registries by name: pure, no desktop."""

from __future__ import annotations

import json

import pytest

from slime.agentic.gui.evaluators import GETTERS, METRICS
from slime.agentic.gui.evaluators.metrics import (
    check_direct_json_object,
    check_include_exclude,
    check_json_settings,
    check_lines,
    check_list,
    check_output_lines,
    compare_text_file,
    diff_text_file,
    exact_match,
    is_expected_url_pattern_match,
    is_extension_installed,
    is_in_list,
    literal_match,
    match_in_list,
)
from slime.agentic.gui.file_cache import FileCache, MissingCachedFile


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_exact_match_compares_exactly():
    assert exact_match("yes", {"expected": "yes"}) == 1.0
    assert exact_match(" yes\n", {"expected": "yes"}) == 0.0  # OSWorld strips nothing
    assert exact_match(None, {"expected": "yes"}) == 0.0


def test_check_json_settings_reads_its_keys_at_the_top_level(tmp_path):
    # VS Code's settings.json: "editor.wordWrapColumn" is one key, not editor -> wordWrapColumn
    settings = write(tmp_path, "settings.json", json.dumps({"editor.wordWrapColumn": 100, "editor": {"tabSize": 2}}))
    assert check_json_settings(settings, {"expected": {"editor.wordWrapColumn": 100}}) == 1.0
    assert check_json_settings(settings, {"expected": {"editor.wordWrapColumn": 80}}) == 0.0
    assert check_json_settings(settings, {"expected": {"editor.tabSize": 2}}) == 0.0  # not reached into objects
    assert check_json_settings(write(tmp_path, "bad.json", "{not json"), {"expected": {}}) == 0.0
    assert check_json_settings(None, {"expected": {}}) == 0.0


def test_the_text_metrics(tmp_path):
    assert check_include_exclude("a b c", {"include": ["a", "c"], "exclude": ["d"]}) == 1.0
    assert check_include_exclude("a b d", {"include": ["a"], "exclude": ["d"]}) == 0.0
    assert match_in_list("b", {"expected": ["a", "b"]}) == 1.0 and match_in_list("c", {"expected": ["a"]}) == 0.0
    assert is_in_list(["a", "b"], {"expected": "b"}) == 1.0 and is_in_list(["a"], {"expected": "b"}) == 0.0
    assert literal_match("Yes", "yes", ignore_case=True) == 1.0 and literal_match("Yes", "yes") == 0.0
    assert literal_match(["A", 1], ["a", "1"], type="list", ignore_case=True) == 1.0
    assert literal_match(["a"], ["a", "b"], type="list") == 0.0
    assert check_output_lines("x\n\n y \n", {"expected": ["x", "y"]}) == 1.0
    assert check_output_lines("y\nx\n", {"expected": ["x", "y"]}) == 0.0
    assert is_extension_installed("ms-python.python\n", {"type": "contain", "expected": "ms-python.python"}) == 1.0
    assert is_extension_installed("ms-python.python\n", {"type": "not_contain", "expected": "ms-python.python"}) == 0


def test_the_file_metrics(tmp_path):
    notes = write(tmp_path, "notes.txt", "apples\n\n rice \n")
    assert check_lines(notes, {"expected": ["apples", "rice"]}) == 1.0
    assert check_lines(notes, {"expected": ["rice"]}) == 0.0 and check_lines(None, {"expected": []}) == 0.0
    assert check_list(notes, {"expect": ["^app", "ric"], "unexpect": ["bananas"]}) == 1.0
    assert check_list(notes, {"expect": ["^app"], "unexpect": ["rice"]}) == 0.0
    gold = write(tmp_path, "gold.txt", "Hello  World\n")
    assert compare_text_file(write(tmp_path, "same.txt", "Hello  World\n"), gold) == 1.0
    other = write(tmp_path, "other.txt", "hello\tworld")
    assert compare_text_file(other, gold) == 0.0
    assert compare_text_file(other, gold, ignore_blanks=True, ignore_case=True) == 1.0
    assert diff_text_file(write(tmp_path, "a.txt", "1\n2\n3\n4\n"), write(tmp_path, "b.txt", "1\n2\n3\n5\n")) == 0.75


def test_check_direct_json_object():
    assert check_direct_json_object("{'name': 'x', 'n': 2}", {"expected": {"name": "x", "n": 2}}) == 1.0
    assert check_direct_json_object({"name": "y"}, {"expected": {"name": "x"}}) == 0.0
    assert check_direct_json_object({"tags": "b"}, {"expected": {"tags": ["a", "b"]}, "expect_in_result": True}) == 1.0
    assert check_direct_json_object({"title": "a long title"}, {"expected": {"title": "long"},
                                                                "expect_in_result": True}) == 1.0
    assert check_direct_json_object("not json", {"expected": {"a": 1}}) == 0.0


def test_is_expected_url_pattern_match():
    rules = {"expected": [r"^https://www\.example\.com/", r"q=cats"]}
    assert is_expected_url_pattern_match("https://www.example.com/search?q=cats", rules) == 1.0
    assert is_expected_url_pattern_match({"url": "https://www.example.com/search?q=dogs"}, rules) == 0.0
    assert is_expected_url_pattern_match(None, rules) == 0.0


def test_the_registries_name_what_the_loader_accepts():
    assert {"exact_match", "check_json_settings", "compare_text_file", "infeasible"} <= set(METRICS)
    assert set(GETTERS) == {"vm_file", "vm_command_line", "vm_command_error", "rule", "cloud_file", "cache_file",
                            "vlc_config", "gimp_config_file", "open_tabs_info", "active_tab_info",
                            "active_url_from_accessTree", "active_tab_url_parse", "rule_relativeTime"}


def test_the_file_cache_is_laid_out_as_osworlds(tmp_path):
    cache = FileCache(tmp_path)
    url = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/x/report.docx"
    # OSWorld: cache/<task id>/<uuid5(NAMESPACE_URL, url)>_<basename(path)>
    assert cache.download_path("task-1", url, "/home/user/Desktop/report.docx").name.endswith("_report.docx")
    assert cache.download_path("task-1", url, "/home/user/report.docx") == \
        tmp_path.resolve() / "task-1" / "7bffd8dd-b934-5b3b-aa2f-dc256f355dd9_report.docx"
    with pytest.raises(MissingCachedFile, match="it stands for https://huggingface.co"):
        cache.read(cache.download_path("task-1", url, "/x/report.docx"), url)
    with pytest.raises(ValueError, match="not a plain file name"):
        cache.cloud_path("../etc", "passwd")
