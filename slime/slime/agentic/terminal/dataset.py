"""Task folders -> the trainer's prompt data (upstream's `convert_task_to_dataset`): one JSON line per task,
`{"task": {"task_name", "task_path", "instruction", "data_source"}}`, `task_path` relative to the tasks folder (each
pool server resolves it under its own copy), with a held-out split that is the same for the same seed.

    python -m slime.agentic.terminal.dataset --tasks-dir terminal-rl/tasks --out-dir terminal-rl/data --heldout 9

The held-out tasks are drawn per category (round robin over the categories, each shuffled by the seed), so every
kind of task is seen in training and tested out of it.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from pathlib import Path

from .tasks import DEFAULT_TASKS_DIR, TerminalTask, load_tasks


def split_tasks(tasks: list[TerminalTask], heldout: int, seed: int = 0) -> tuple[list[TerminalTask], list[TerminalTask]]:
    """(train, held out): `heldout` tasks taken round robin over the categories, each category shuffled by `seed`."""
    if not 0 <= heldout < len(tasks):
        raise ValueError(f"heldout must be in [0, {len(tasks) - 1}] for {len(tasks)} tasks, got {heldout}")
    by_category: dict[str, list[TerminalTask]] = defaultdict(list)
    for task in sorted(tasks, key=lambda t: t.name):
        by_category[task.category or "uncategorised"].append(task)
    rng = random.Random(seed)
    queues = []
    for category in sorted(by_category):
        members = list(by_category[category])
        rng.shuffle(members)
        queues.append(members)
    chosen: list[TerminalTask] = []
    while len(chosen) < heldout:
        for queue in queues:
            if queue and len(chosen) < heldout:
                chosen.append(queue.pop(0))
    names = {t.name for t in chosen}
    train = [t for t in sorted(tasks, key=lambda t: t.name) if t.name not in names]
    return train, sorted(chosen, key=lambda t: t.name)


def write_jsonl(tasks: list[TerminalTask], path: Path, relative_to: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.writelines(json.dumps(task.to_record(relative_to)) + "\n" for task in tasks)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks-dir", default=str(DEFAULT_TASKS_DIR))
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--heldout", type=int, default=0, help="tasks kept out of training (train.jsonl / heldout.jsonl)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    root = Path(args.tasks_dir).resolve()
    tasks = load_tasks(root)
    train, heldout = split_tasks(tasks, args.heldout, args.seed)
    out = Path(args.out_dir)
    write_jsonl(train, out / "train.jsonl", root)
    if heldout:
        write_jsonl(heldout, out / "heldout.jsonl", root)
    print(f"{len(train)} training tasks -> {out / 'train.jsonl'}"
          + (f"; {len(heldout)} held out -> {out / 'heldout.jsonl'}: {', '.join(t.name for t in heldout)}"
             if heldout else ""))


if __name__ == "__main__":
    main()
