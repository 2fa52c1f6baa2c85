"""The OSWorld coverage report over a task set written here: a bad file is counted with its reason (never a crash),
and each reason that keeps a task from running here (not implemented, app missing, network, a file the cache lacks)
is counted per domain."""

from __future__ import annotations

import json

from slime.agentic.gui.file_cache import FileCache
from slime.agentic.gui.osworld_report import main

RULE = {"type": "rule", "rules": {"expected": "1"}}
TASKS = {
    "os/good": {"id": "good", "instruction": "x", "related_apps": ["os"], "config": [],
                "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "true"},
                              "expected": RULE}},
    "os/cached": {"id": "cached", "instruction": "x", "related_apps": ["os"],
                  "config": [{"type": "download", "parameters": {"files": [{"url": "https://f.org/a.txt",
                                                                            "path": "/home/user/a.txt"}]}}],
                  "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "true"},
                                "expected": RULE}},
    "os/web": {"id": "web", "instruction": "x", "related_apps": ["os"],
               "config": [{"type": "execute", "parameters": {"command": "curl https://example.org/x", "shell": True}}],
               "evaluator": {"func": "infeasible"}},
    "gimp/photo": {"id": "photo", "instruction": "x", "related_apps": ["definitely-not-installed-app"],
                   "config": [], "evaluator": {"func": "compare_audios", "result": {"type": "vm_file", "path": "/a",
                                                                                    "dest": "a"},
                                               "expected": RULE}},
}


def test_the_report_counts_what_loads_and_what_can_run_per_domain(tmp_path, capsys):
    root = tmp_path / "evaluation_examples"
    for key, data in TASKS.items():
        path = root / "examples" / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
    (root / "examples" / "os" / "broken.json").write_text("{not json")
    (root / "test_all.json").write_text(json.dumps({"os": ["good", "cached", "web", "broken"], "gimp": ["photo"]}))
    cache = tmp_path / "cache"
    (cache / "cached").mkdir(parents=True)
    FileCache(cache).download_path("cached", "https://f.org/a.txt", "/home/user/a.txt").write_text("a")

    assert main([str(root), "--set", "test_all.json", "--cache", str(cache), "--json", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["summary"]["domains"]["os"] == {"tasks": 4, "load": 3, "implemented": 3, "apps": 3, "offline": 2,
                                                  "files": 3, "runnable": 2, "with_files": 2}
    gimp = report["summary"]["domains"]["gimp"]
    assert (gimp["load"], gimp["implemented"], gimp["runnable"]) == (1, 0, 0)
    reasons = {t["task_id"]: t["reasons"] for t in report["tasks"]}
    assert reasons["good"] == [] and reasons["cached"] == []
    assert reasons["web"] == ["network: it opens or reads a web page"]
    assert reasons["broken"][0].startswith("does not load: JSONDecodeError")
    assert reasons["photo"] == ["metric 'compare_audios' is not implemented here",
                                "app definitely-not-installed-app: unknown to this report"]
    assert "| **all** | 5 | 4 |" in capsys.readouterr().out
    # without the cache, the download counts as missing
    assert main([str(root), "--set", "test_all.json", "--json", str(tmp_path / "r2.json")]) == 0
    again = json.loads((tmp_path / "r2.json").read_text())
    assert again["summary"]["domains"]["os"]["runnable"] == 1
    assert again["summary"]["domains"]["os"]["with_files"] == 2  # the cached task runs once the cache has its file


def test_nothing_loaded_is_an_error(tmp_path):
    (tmp_path / "examples").mkdir()
    assert main([str(tmp_path)]) == 2
