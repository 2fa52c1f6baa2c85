"""How much of an OSWorld task set loads and can run here, per domain, and what stops the rest.

    python -m slime.agentic.gui.osworld_report OSWORLD/evaluation_examples [--set test_all.json] [--cache DIR]
        [--json report.json] [--markdown report.md]

TASKS_DIR is OSWorld's ``evaluation_examples`` folder (``examples/<domain>/<id>.json``, and the set files such as
``test_all.json`` naming the tasks of a split) or any folder of ``<domain>/<id>.json``. Every task file is read; one
that does not parse or load is counted with its reason, never a crash. A task can run here when it loads and:

* **implemented**: every setup step, getter and metric it uses is implemented (:attr:`GuiTask.unsupported`);
* **apps**: the applications it names (``related_apps``) are installed on this machine (``APP_COMMANDS``);
* **offline**: nothing in it needs the network (a Google Drive or login step, a web page that is not local);
* **files**: the files it downloads and the expected files it compares with are in the file cache (``--cache``,
  laid out as OSWorld's cache; without one, every task with such a file is counted as lacking it).

The report counts each per domain, and **with_files**: the tasks that lack nothing but files from the cache (they run
here once the user has filled it), and lists the reasons by frequency. Exit 0 when any task loaded, 2 when none.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .file_cache import FileCache
from .tasks import GuiTask, TaskFormatError, task_from_dict

# the commands that provide each of OSWorld's related_apps (any one of them)
APP_COMMANDS = {
    "chrome": ("google-chrome", "chromium"), "libreoffice_calc": ("soffice", "libreoffice"),
    "libreoffice_writer": ("soffice", "libreoffice"), "libreoffice_impress": ("soffice", "libreoffice"),
    "gimp": ("gimp",), "vlc": ("vlc",), "thunderbird": ("thunderbird",), "vscode": ("code",), "vs_code": ("code",),
    "os": (), "terminal": ("x-terminal-emulator", "gnome-terminal", "xterm"), "nautilus": ("nautilus",),
    "libreoffice": ("soffice", "libreoffice"), "calc": ("soffice", "libreoffice"), "writer": ("soffice", "libreoffice"),
    "browser": ("google-chrome", "chromium"), "pdf": (), "image": (), "ubuntu_media_player": ("totem", "vlc"),
    "picard": ("picard",),
}
NETWORK_STEPS = ("googledrive", "login", "proxy")
COLUMNS = ("tasks", "load", "implemented", "apps", "offline", "files", "runnable", "with_files")
NOT_IMPLEMENTED = ("config step", "postconfig step", "metric", "result getter", "expected getter")  # GuiTask.unsupported
_URL = re.compile(r"https?://[^\s'\"<>]+")
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "0.0.0.0")


@dataclass
class TaskReport:
    domain: str
    task_id: str
    loaded: bool = False
    reasons: list[str] = field(default_factory=list)  # why it cannot run here (empty: it can)
    task: GuiTask | None = field(default=None, repr=False)  # the task as loaded (None: it did not load)

    @property
    def runnable(self) -> bool:
        return self.loaded and not self.reasons


def examples_dir(root: Path) -> Path:
    """Where the `<domain>/<id>.json` files are: OSWorld's `examples/` under `root`, or `root` itself."""
    return root / "examples" if (root / "examples").is_dir() else root


def task_files(root: Path, set_file: str | None) -> list[tuple[str, Path]]:
    """(domain, path) of the tasks: the set file's, or every <domain>/<id>.json under examples/ (or under root)."""
    examples = examples_dir(root)
    if set_file:
        names = json.loads((root / set_file if not Path(set_file).is_absolute() else Path(set_file)).read_text())
        return [(domain, examples / domain / f"{task_id}.json") for domain, ids in names.items() for task_id in ids]
    return [(p.parent.name, p) for p in sorted(examples.glob("*/*.json")) if not p.name.endswith(".solution.json")]


def _urls(task: GuiTask) -> list[str]:
    steps = [*task.config, *task.evaluator.get("postconfig", [])]
    found = []
    for step in steps:
        if step["type"] in ("download",):
            continue  # the file cache's business
        found += _URL.findall(json.dumps(step.get("parameters", {})))
    for key in ("result", "expected"):
        getters = task.evaluator.get(key)
        for g in getters if isinstance(getters, list) else [getters]:
            if isinstance(g, dict) and g.get("type") not in ("cloud_file", "rule", "rule_relativeTime"):
                found += _URL.findall(json.dumps(g))
    return [u for u in found if not any(f"//{h}" in u for h in _LOCAL_HOSTS)]


def cached_files(task: GuiTask) -> list[tuple[str, str, str]]:
    """(kind, url, name) of every file the task takes from the cache: downloads and cloud_file expected values."""
    files = []
    for step in [*task.config, *task.evaluator.get("postconfig", [])]:
        if step["type"] == "download":
            files += [("download", f.get("url", ""), f.get("path", ""))
                      for f in step.get("parameters", {}).get("files", [])]
    for key in ("result", "expected"):
        getters = task.evaluator.get(key)
        for g in getters if isinstance(getters, list) else [getters]:
            if isinstance(g, dict) and g.get("type") == "cloud_file":
                urls = g["path"] if g.get("multi") else [g["path"]]
                dests = g["dest"] if g.get("multi") else [g["dest"]]
                files += [("cloud_file", u, d) for u, d in zip(urls, dests)]
    return files


def assess(domain: str, path: Path, cache: FileCache | None, installed: dict[str, bool]) -> TaskReport:
    report = TaskReport(domain, path.stem)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        task = task_from_dict(data, domain=domain, path=path)
    except (OSError, json.JSONDecodeError, TaskFormatError) as e:
        report.reasons.append(f"does not load: {type(e).__name__}: {str(e)[:200]}")
        return report
    report.loaded, report.task = True, task
    report.reasons += task.unsupported
    for app in task.related_apps:
        commands = APP_COMMANDS.get(app.strip().lower().replace(" ", "_"))
        if commands is None:
            report.reasons.append(f"app {app}: unknown to this report")
        elif commands and not any(installed.setdefault(c, shutil.which(c) is not None) for c in commands):
            report.reasons.append(f"app {app}: not installed ({' or '.join(commands)})")
    if any(s["type"] in NETWORK_STEPS for s in task.config):
        report.reasons.append("network: a Google Drive, login or proxy step")
    elif _urls(task):
        report.reasons.append("network: it opens or reads a web page")
    for kind, url, name in cached_files(task):
        if cache is None:
            report.reasons.append(f"files: {kind} needs the file cache (--cache)")
            break
        where = cache.download_path(task.id, url, name) if kind == "download" else cache.cloud_path(task.id, name)
        if not where.is_file():
            report.reasons.append(f"files: {kind} not in the cache")
            break
    return report


def _kind(reason: str) -> str:
    """A reason without the task's own details, for counting."""
    return re.sub(r"\(.*?\)", "(...)", reason.split(": ", 2)[0] if reason.startswith("does not load") else reason)


def summarise(reports: list[TaskReport]) -> dict:
    domains: dict[str, Counter] = {}
    for r in reports:
        c = domains.setdefault(r.domain, Counter())
        c["tasks"] += 1
        c["load"] += r.loaded
        c["implemented"] += r.loaded and not any(x.startswith(NOT_IMPLEMENTED) for x in r.reasons)
        c["apps"] += r.loaded and not any(x.startswith("app ") for x in r.reasons)
        c["offline"] += r.loaded and not any(x.startswith("network") for x in r.reasons)
        c["files"] += r.loaded and not any(x.startswith("files") for x in r.reasons)
        c["runnable"] += r.runnable
        # everything but the file cache: what runs here once the user has filled it
        c["with_files"] += r.loaded and all(x.startswith("files") for x in r.reasons)
    reasons = Counter(_kind(x) for r in reports for x in r.reasons)
    return {"domains": {d: dict(c) for d, c in sorted(domains.items())},
            "total": {k: sum(c[k] for c in domains.values()) for k in COLUMNS},
            "reasons": reasons.most_common()}


def markdown(summary: dict) -> str:
    cols = COLUMNS
    lines = ["| domain | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for domain, c in [*summary["domains"].items(), ("**all**", summary["total"])]:
        lines.append(f"| {domain} | " + " | ".join(str(c.get(k, 0)) for k in cols) + " |")
    lines += ["", "Reasons (tasks may have several):", ""]
    lines += [f"- {n} × {reason}" for reason, n in summary["reasons"][:25]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tasks_dir", type=Path, help="OSWorld's evaluation_examples (or a folder of <domain>/<id>.json)")
    p.add_argument("--set", dest="set_file", help="a set file naming the tasks (e.g. test_all.json)")
    p.add_argument("--cache", type=Path, help="the file cache (OSWorld's cache layout)")
    p.add_argument("--json", type=Path, help="write the per-task reasons and the summary here")
    p.add_argument("--markdown", type=Path, help="write the summary table here")
    args = p.parse_args(argv)
    try:
        files = task_files(args.tasks_dir, args.set_file)
        cache = FileCache(args.cache) if args.cache else None
    except (OSError, ValueError) as e:
        print(f"osworld_report: {e}", file=sys.stderr)
        return 2
    installed: dict[str, bool] = {}
    reports = [assess(domain, path, cache, installed) for domain, path in files]
    summary = summarise(reports)
    table = markdown(summary)
    print(table, end="")
    if args.markdown:
        args.markdown.write_text(table)
    if args.json:
        rows = [{k: v for k, v in r.__dict__.items() if k != "task"} for r in reports]
        args.json.write_text(json.dumps({"summary": summary, "tasks": rows}, indent=1))
    if not summary["total"].get("load"):
        print(f"osworld_report: no task loaded from {args.tasks_dir}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
