"""What task families share across settings (`terminal-rl/terminal_families.py`, `gui-rl/gui_families.py`):
drawing distinct instances from seeds, the four data files of a written family set, and the command line.

A family draws an instance from a `random.Random` seeded by `"<family>:<seed * 10^6 + k>"` (independent of the
global random state and of other families), so the same seed always writes the same instances. The data files:
`demos.jsonl` and `rl.jsonl` (disjoint training instances), `heldout_instances.jsonl` (unseen instances of the
training families) and `heldout_tasks.jsonl` (the held-out families, which nothing trains on).
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

T = TypeVar("T")
DATA_FILES = ("demos", "rl", "heldout_instances", "heldout_tasks")


def draw_distinct(name: str, draw: Callable[[random.Random], T], identity: Callable[[T], str], count: int, seed: int,
                  exclude: set[str]) -> list[tuple[int, T]]:
    """`count` (instance seed, instance) pairs of family `name` whose `identity` is not in `exclude` nor repeated."""
    drawn: list[tuple[int, T]] = []
    taken = set(exclude)
    k = 0
    while len(drawn) < count:
        if k > 50 * count + 100:
            raise RuntimeError(f"family {name}: only {len(drawn)} distinct instances in {k} draws")
        instance_seed = seed * 1_000_000 + k
        k += 1
        instance = draw(random.Random(f"{name}:{instance_seed}"))
        if identity(instance) not in taken:
            taken.add(identity(instance))
            drawn.append((instance_seed, instance))
    return drawn


class Family(Protocol[T]):
    name: str
    draw: Callable[[random.Random], T]


def write_family_set(out: Path, train: list[Family], heldout: list[Family], identity: Callable[[T], str],
                     write: Callable[[Family, str, int, T], dict], train_instances: int, demo_share: float,
                     heldout_instances: int, seed: int) -> dict[str, int]:
    """Draws and writes every instance of a family set and its four data files. `write(family, tag, instance seed,
    instance)` writes one task (tag `t<k>` for training instances, `h<k>` for held-out ones) and returns its data
    record. Held-out instances of a training family are drawn from `seed + 1`, excluding its training instances."""
    records: dict[str, list[dict]] = {key: [] for key in DATA_FILES}
    n_demo = round(train_instances * demo_share)
    for family in train:
        drawn = draw_distinct(family.name, family.draw, identity, train_instances, seed, set())
        held = draw_distinct(family.name, family.draw, identity, heldout_instances, seed + 1,
                             {identity(i) for _, i in drawn})
        for k, (instance_seed, instance) in enumerate(drawn):
            records["demos" if k < n_demo else "rl"].append(write(family, f"t{k:03d}", instance_seed, instance))
        for k, (instance_seed, instance) in enumerate(held):
            records["heldout_instances"].append(write(family, f"h{k:03d}", instance_seed, instance))
    for family in heldout:
        for k, (instance_seed, instance) in enumerate(draw_distinct(family.name, family.draw, identity,
                                                                    heldout_instances, seed + 1, set())):
            records["heldout_tasks"].append(write(family, f"h{k:03d}", instance_seed, instance))
    return write_data_files(out, records)


def write_data_files(out: Path, records: dict[str, list[dict]]) -> dict[str, int]:
    """The four data files in `out`; returns the count per file."""
    for key in DATA_FILES:
        (Path(out) / f"{key}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[key]))
    return {key: len(records[key]) for key in DATA_FILES}


def load_data_files(out: Path) -> dict[str, list[dict]]:
    """The four data files a family set wrote in `out`, as lists of records."""
    return {key: [json.loads(line) for line in (Path(out) / f"{key}.jsonl").read_text().splitlines() if line.strip()]
            for key in DATA_FILES}


def main(description: str, write_families: Callable[..., dict[str, int]], train_families: int, heldout_families: int,
         train_instances: int, argv: list[str] | None = None) -> None:
    """The `python -m slime.agentic.<setting>.families` command line."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--train-instances", type=int, default=train_instances, help="per training family")
    parser.add_argument("--demo-share", type=float, default=0.5, help="of those, the share kept for demonstrations")
    parser.add_argument("--heldout-instances", type=int, default=4, help="per family, unseen instances")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    counts = write_families(args.out, args.train_instances, args.demo_share, args.heldout_instances, args.seed)
    print(f"{train_families} training families, {heldout_families} held-out families -> {args.out}/tasks; "
          + ", ".join(f"{k}.jsonl {v}" for k, v in counts.items()))
