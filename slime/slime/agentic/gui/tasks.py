"""GUI tasks in OSWorld's JSON format, their setup steps, and their evaluation, all through the VM server's API (so a
task runs the same on a local desktop and on an OSWorld VM).

A task (``gui-rl/tasks/<domain>/<id>.json``)::

    {"id": "...", "snapshot": "...", "instruction": "...", "source": "...", "related_apps": [...],
     "config": [{"type": "launch", "parameters": {"command": [...]}}, ...],
     "evaluator": {"func": "exact_match", "result": {...}, "expected": {...}, "options": {}, "postconfig": [...],
                   "conj": "and"}}

Setup and postconfig steps run as OSWorld's controller runs them (:mod:`.setup_controller`: which failures stop the
setup and which are logged, placeholders, downloads from the local file cache); a step type OSWorld does not have
is refused when the task loads.

Evaluation (:func:`evaluate`), as OSWorld's ``DesktopEnv.evaluate``: the postconfig steps, then ``func`` is one
metric or a list (then ``result``, ``expected`` and ``options`` are lists too and ``conj`` combines them: ``and`` =
the mean, 0 when any is 0; ``or`` = the max). Each metric gets its result getter's value, the expected getter's
value when there is one, and its options (:mod:`.evaluators`: the getters and metrics by name, with OSWorld's
semantics: ``vm_file`` gives a local path). A task whose getter or metric is not implemented here loads, and
:attr:`GuiTask.unsupported` says why it cannot run (the provider refuses it at reset, the check reports it).

The FAIL semantics, without upstream's leak (spec section 7): an ``infeasible`` task scores 1 exactly when the agent
itself terminated with failure; a truncated episode (out of steps) or one that ended otherwise scores 0. On any other
task an explicit failure scores 0 and the metric is not run.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .evaluators import GETTERS, METRICS, EvalEnv, EvaluationError, unsupported_options
from .file_cache import FileCache
from .setup_controller import NOT_HERE, SETUP_TYPES, DesktopFacts, SetupController, SetupError, new_cache_dir
from .vm_client import VMClient

logger = logging.getLogger(__name__)

TASKS_DIR = Path(__file__).resolve().parents[4] / "gui-rl" / "tasks"
FAILED_BY_AGENT = "FAIL"  # the last action when the agent terminated with status failure


class TaskFormatError(ValueError):
    """A task file is not a valid task; the message names the file and the field."""


@dataclass(frozen=True)
class GuiTask:
    id: str
    instruction: str
    config: tuple[dict, ...]
    evaluator: dict
    domain: str = ""
    snapshot: str = ""
    source: str = ""
    related_apps: tuple[str, ...] = ()
    path: Path | None = None
    raw: dict = field(default_factory=dict, compare=False)

    @property
    def key(self) -> str:
        """``domain/id``: how rollouts and the provider name a task."""
        return f"{self.domain}/{self.id}" if self.domain else self.id

    @property
    def infeasible(self) -> bool:
        return _funcs(self.evaluator) == ["infeasible"]

    @property
    def unsupported(self) -> list[str]:
        """Why this task cannot run here (empty: it can): OSWorld's setup steps, getters and metrics this project
        does not implement."""
        why = []
        for where, steps in (("config", self.config), ("postconfig", self.evaluator.get("postconfig", []))):
            why += [f"{where} step {s['type']}: {NOT_HERE[s['type']]}" for s in steps if s["type"] in NOT_HERE]
        funcs = _funcs(self.evaluator)
        why += [f"metric {f!r} is not implemented here" for f in funcs if f not in METRICS]
        options = self.evaluator.get("options")
        options = options if isinstance(options, list) else [options]  # as _score pairs them
        for func, opts in zip(funcs, options):
            if func in METRICS and isinstance(opts, dict):
                why += [f"metric {func!r}: {what} is not implemented here" for what in unsupported_options(func, opts)]
        if funcs != ["infeasible"]:
            for key in ("result", "expected"):
                getters = self.evaluator.get(key)
                for g in getters if isinstance(getters, list) else [getters]:
                    if isinstance(g, dict) and g.get("type") not in GETTERS:
                        why.append(f"{key} getter {g.get('type')!r} is not implemented here")
        return list(dict.fromkeys(why))


def _funcs(evaluator: dict) -> list[str]:
    func = evaluator.get("func")
    return list(func) if isinstance(func, list) else [func]


def _check_steps(steps, where: str) -> tuple[dict, ...]:
    if not isinstance(steps, list):
        raise TaskFormatError(f"{where} must be a list of steps")
    for i, step in enumerate(steps):
        if not isinstance(step, dict) or step.get("type") not in SETUP_TYPES:
            raise TaskFormatError(f"{where}[{i}]: type {step.get('type') if isinstance(step, dict) else step!r} is "
                                  f"not an OSWorld setup step ({', '.join(SETUP_TYPES)})")
        if not isinstance(step.get("parameters", {}), dict):
            raise TaskFormatError(f"{where}[{i}]: parameters must be an object")
    return tuple(steps)


def task_from_dict(data: dict, *, domain: str = "", path: Path | None = None) -> GuiTask:
    where = str(path or "<task>")
    if not isinstance(data, dict):
        raise TaskFormatError(f"{where}: a task is a JSON object")
    for name in ("id", "instruction"):
        if not isinstance(data.get(name), str) or not data[name].strip():
            raise TaskFormatError(f"{where}: {name!r} must be a non-empty string")
    evaluator = data.get("evaluator")
    if not isinstance(evaluator, dict):
        raise TaskFormatError(f"{where}: 'evaluator' must be an object")
    _check_steps(evaluator.get("postconfig", []), f"{where}: evaluator.postconfig")
    funcs = _funcs(evaluator)
    if not funcs or not all(isinstance(f, str) and f for f in funcs):
        raise TaskFormatError(f"{where}: evaluator.func must name a metric or a list of them")
    if funcs != ["infeasible"]:
        results = evaluator.get("result")
        results = results if isinstance(results, list) else [results]
        if len(results) != len(funcs):
            raise TaskFormatError(f"{where}: evaluator.result must give one getter per func")
        for r in results:
            if not isinstance(r, dict) or not isinstance(r.get("type"), str):
                raise TaskFormatError(f"{where}: evaluator.result must be getters ({{\"type\": ...}})")
        if evaluator.get("conj", "and") not in ("and", "or"):
            raise TaskFormatError(f"{where}: evaluator.conj must be 'and' or 'or'")
    return GuiTask(
        id=data["id"], instruction=data["instruction"], config=_check_steps(data.get("config", []), "config"),
        evaluator=evaluator, domain=domain, snapshot=str(data.get("snapshot", "")), source=str(data.get("source", "")),
        related_apps=tuple(data.get("related_apps") or ()), path=path, raw=data)


def load_task(path: str | os.PathLike) -> GuiTask:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise TaskFormatError(f"{path}: {e}") from None
    return task_from_dict(data, domain=path.parent.name, path=path)


def load_tasks(root: str | os.PathLike = TASKS_DIR) -> list[GuiTask]:
    """Every ``<domain>/<id>.json`` under `root` (solutions, ``*.solution.json``, are not tasks), sorted by key."""
    tasks = [load_task(p) for p in sorted(Path(root).glob("*/*.json")) if not p.name.endswith(".solution.json")]
    return sorted(tasks, key=lambda t: t.key)


def find_task(key: str, root: str | os.PathLike = TASKS_DIR) -> GuiTask:
    """A task by ``domain/id`` (or a bare id when it is unique) under `root`; KeyError when there is none."""
    root = Path(root)
    if "/" in key:
        domain, _, task_id = key.partition("/")
        path = root / domain / f"{task_id}.json"
        if ".." in Path(key).parts or not path.is_file():
            raise KeyError(f"no task {key!r} under {root}")
        return load_task(path)
    found = [p for p in root.glob(f"*/{key}.json")]
    if len(found) != 1:
        raise KeyError(f"no task {key!r} under {root}" if not found else f"task id {key!r} is ambiguous: use domain/id")
    return load_task(found[0])


# ------------------------------------------------------------------------------------------------------ setup


async def run_setup(client: VMClient, steps: Sequence[dict], *, task_dir: Path | None = None, task_id: str = "",
                    file_cache: FileCache | None = None, cache_dir: Path | None = None,
                    facts: DesktopFacts | None = None) -> SetupController:
    """Run setup (or postconfig) steps as OSWorld does (:mod:`.setup_controller`); SetupError names the step that
    stopped it. The controller is returned: its `warnings` list what failed and was let go."""
    controller = SetupController(client, task_id=task_id, task_dir=task_dir, file_cache=file_cache,
                                 cache_dir=cache_dir, facts=facts)
    await controller.setup(list(steps))
    return controller


# ------------------------------------------------------------------------------------------------------ evaluation


@dataclass(frozen=True)
class Evaluation:
    score: float  # 0..1 (OSWorld's); the RL reward is +1 only for 1.0
    reason: str
    parts: tuple[float, ...] = ()


async def evaluate(client: VMClient, task: GuiTask, last_action: str | None, *, file_cache: FileCache | None = None,
                   cache_dir: Path | None = None) -> Evaluation:
    """Score the episode (module docstring): `last_action` is FAIL when the agent terminated with failure, DONE when
    it said it succeeded, None when it did neither (out of steps, an error). `cache_dir`: the episode's directory
    (setup outputs, fetched files; a fresh one, removed afterwards, when None)."""
    ev = task.evaluator
    if task.infeasible:
        if last_action == FAILED_BY_AGENT:
            return Evaluation(1.0, "infeasible: the agent said it cannot be done")
        return Evaluation(0.0, "infeasible: the agent did not say it cannot be done"
                          + (" (the episode was cut off)" if last_action is None else ""))
    if last_action == FAILED_BY_AGENT:
        return Evaluation(0.0, "the agent gave up on a feasible task")
    if task.unsupported:
        raise EvaluationError(f"task {task.key} cannot be evaluated here: {'; '.join(task.unsupported)}")
    own = cache_dir is None
    cache_dir = new_cache_dir() if own else cache_dir
    try:
        await run_setup(client, ev.get("postconfig", []), task_dir=task.path.parent if task.path else None,
                        task_id=task.id, file_cache=file_cache, cache_dir=cache_dir)
        env = EvalEnv(client, cache_dir, task.id, file_cache)
        return await _score(env, ev)
    finally:
        if own:
            import shutil

            shutil.rmtree(cache_dir, ignore_errors=True)


async def _score(env: EvalEnv, ev: dict) -> Evaluation:
    funcs = _funcs(ev)
    listify = (lambda v: v if isinstance(v, list) else [v]) if isinstance(ev.get("func"), list) else (lambda v: [v])
    results, options = listify(ev.get("result")), listify(ev.get("options") or {})
    expected = listify(ev["expected"]) if ev.get("expected") is not None else [None] * len(funcs)
    conj = ev.get("conj", "and")
    parts: list[float] = []
    for i, func in enumerate(funcs):
        value = await GETTERS[results[i]["type"]](env, results[i])
        getter = expected[i] if i < len(expected) else None
        kwargs = (options[i] if i < len(options) else None) or {}
        try:
            if getter:
                score = METRICS[func](value, await GETTERS[getter["type"]](env, getter), **kwargs)
            else:
                score = METRICS[func](value, **kwargs)
        except EvaluationError:
            raise
        except Exception as e:  # noqa: BLE001 - a state the metric cannot read (a broken file) scores 0, as OSWorld
            logger.info("gui evaluation: metric %s failed on the result: %s", func, e)
            score = 0.0
        parts.append(float(score))
        if conj == "and" and score == 0:
            break  # as OSWorld: the first 0 decides
    if conj == "or":
        total = max(parts)
    else:
        total = 0.0 if any(p == 0 for p in parts) else sum(parts) / len(parts)
    reason = "" if total == 1.0 else "not met: " + ", ".join(f for f, p in zip(funcs, parts) if p < 1)
    return Evaluation(total, reason, tuple(parts))


# ------------------------------------------------------------------------------------------------------ rows


def split_of(task: GuiTask, every: int = 4) -> str:
    """``heldout`` for every `every`-th task of its domain (in id order), else ``train``: each app is in both."""
    siblings = sorted(p.stem for p in task.path.parent.glob("*.json") if not p.name.endswith(".solution.json")) \
        if task.path else [task.id]
    return "heldout" if siblings.index(task.id) % every == every - 1 else "train"


def training_row(task: GuiTask) -> dict:
    """A prompt row of the trainer (``--input-key prompt --metadata-key metadata``), upstream's metadata shape."""
    return {"prompt": task.key, "label": "", "metadata": {"domain": task.domain, "example_id": task.id,
                                                          "instruction": task.instruction}}


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="Write the trainer's prompt rows of GUI tasks (JSONL).")
    parser.add_argument("--tasks-dir", type=Path, default=TASKS_DIR)
    parser.add_argument("--split", choices=["train", "heldout", "all"], default="all")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    tasks = [t for t in load_tasks(args.tasks_dir) if args.split == "all" or split_of(t) == args.split]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(training_row(t)) + "\n" for t in tasks), encoding="utf-8")
    print(f"{len(tasks)} {args.split} tasks -> {args.out}", file=sys.stderr)
    return 0


__all__ = ["FAILED_BY_AGENT", "TASKS_DIR", "Evaluation", "EvaluationError", "GuiTask", "SetupError", "TaskFormatError",
           "evaluate", "find_task", "load_task", "load_tasks", "run_setup", "split_of", "task_from_dict",
           "training_row"]


if __name__ == "__main__":
    raise SystemExit(main())
