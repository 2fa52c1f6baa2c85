"""Check SWE instances: each must be solvable and not solved already.

    python -m slime.agentic.swe.check                                   # every shipped instance
    python -m slime.agentic.swe.check --instances FILE pytoolz__toolz-1 pytoolz__toolz-2 --json out.json
    python -m slime.agentic.swe.check --backend docker [--image auto|swebench|swe-gym|TEMPLATE]   # in containers

For every instance, each in a fresh tree (:mod:`.evaluate`):

* the gold patch resolves it (sealed evaluation: the patch passes the rules, FAIL_TO_PASS and PASS_TO_PASS pass);
* the empty patch does not;
* at base with the test_patch applied, every FAIL_TO_PASS test fails and every PASS_TO_PASS test passes.

One line per instance, then a summary with the measured time; exit status 0 when every instance checks out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .docker_backend import AUTO, DockerSweBackend
from .evaluate import SweEvaluation, evaluate_patch, run_instance
from .instances import SHIPPED_INSTANCES, SweInstance, load_instances

DEFAULT_INSTANCES = SHIPPED_INSTANCES


@dataclass
class InstanceCheck:
    instance: SweInstance
    gold: SweEvaluation | None = None
    empty: SweEvaluation | None = None
    base: SweEvaluation | None = None
    error: str = ""
    seconds: float = 0.0

    def problems(self) -> list[str]:
        if self.error:
            return [self.error]
        inst, out = self.instance, []
        if not self.gold.resolved:
            out.append(f"gold patch not resolved: {self.gold.reason}")
        if self.empty.resolved:
            out.append("the empty patch resolves it")
        passing = [t for t in inst.FAIL_TO_PASS if self.base.outcomes.get(t) == "passed"]
        if passing:
            out.append(f"FAIL_TO_PASS passing at base: {', '.join(passing[:3])}")
        failing = [t for t in inst.PASS_TO_PASS if self.base.outcomes.get(t) != "passed"]
        if failing:
            out.append(f"PASS_TO_PASS not passing at base: {', '.join(f'{t} ({self.base.outcomes.get(t)})' for t in failing[:3])}")
        return out

    @property
    def ok(self) -> bool:
        return not self.problems()

    def line(self) -> str:
        inst = self.instance
        if self.error:
            return f"FAIL {inst.instance_id:34s} {self.error.splitlines()[0]}"
        f2p, p2p = inst.FAIL_TO_PASS, inst.PASS_TO_PASS
        text = (f"{'ok  ' if self.ok else 'FAIL'} {inst.instance_id:34s} gold {'resolved' if self.gold.resolved else 'NOT resolved'} "
                f"({len(self.gold.passed(inst.tests))}/{len(inst.tests)} pass)  empty {'resolved' if self.empty.resolved else 'refused'}  "
                f"base: FAIL_TO_PASS {len(self.base.passed(f2p))}/{len(f2p)} pass, PASS_TO_PASS "
                f"{len(self.base.passed(p2p))}/{len(p2p)} pass  {self.seconds:.1f}s")
        problems = self.problems()
        return text + ("".join(f"\n     {p}" for p in problems) if problems else "")

    def as_dict(self) -> dict:
        return {"instance_id": self.instance.instance_id, "ok": self.ok, "problems": self.problems(),
                "seconds": round(self.seconds, 2), "gold": self.gold.as_dict() if self.gold else None,
                "empty": self.empty.as_dict() if self.empty else None, "base": self.base.as_dict() if self.base else None}


async def check_instance(instance: SweInstance, docker: DockerSweBackend | None = None, **kwargs) -> InstanceCheck:
    """`docker`: evaluate in containers of that backend (each run a fresh one) instead of the bubblewrap sandbox."""
    check = InstanceCheck(instance)
    start = time.monotonic()
    sealed, unsealed = (docker.evaluate, docker.run_instance) if docker is not None else (evaluate_patch, run_instance)
    try:
        check.gold = await sealed(instance, instance.patch, **kwargs)
        check.empty = await sealed(instance, "", **kwargs)
        check.base = await unsealed(instance, None, **kwargs)
    except Exception as e:  # a store that cannot be built, a sandbox that cannot start: reported, the others go on
        check.error = f"{type(e).__name__}: {e}"
    check.seconds = time.monotonic() - start
    return check


async def check_instances(instances: list[SweInstance], concurrency: int = 1, on_done=None, **kwargs) -> list[InstanceCheck]:
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(inst: SweInstance) -> InstanceCheck:
        async with sem:
            result = await check_instance(inst, **kwargs)
        if on_done is not None:
            on_done(result)
        return result

    return list(await asyncio.gather(*(one(i) for i in instances)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="*", help="instance ids (default: all)")
    parser.add_argument("--instances", type=Path, default=DEFAULT_INSTANCES)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per test run")
    parser.add_argument("--json", type=Path, help="write the per-instance results here")
    parser.add_argument("--backend", choices=["bwrap", "docker"], default="bwrap")
    parser.add_argument("--image", default=AUTO, help="--backend docker: the image rule (swe.docker_backend)")
    parser.add_argument("--docker-host", default=None, help="--backend docker: default $DOCKER_HOST, else "
                                                            "scripts/setup_docker.sh's daemon")
    args = parser.parse_args(argv)
    instances = load_instances(args.instances, args.ids or None)
    docker = DockerSweBackend(args.image, docker_host=args.docker_host) if args.backend == "docker" else None
    start = time.monotonic()
    results = asyncio.run(check_instances(instances, args.concurrency, on_done=lambda c: print(c.line(), flush=True),
                                          timeout=args.timeout, docker=docker))
    total = time.monotonic() - start
    good = sum(c.ok for c in results)
    per_project: dict[str, list[int]] = {}
    for c in results:
        per_project.setdefault(c.instance.repo, [0, 0])
        per_project[c.instance.repo][0] += c.ok
        per_project[c.instance.repo][1] += 1
    print("  ".join(f"{repo}: {ok}/{n}" for repo, (ok, n) in per_project.items()))
    print(f"{good}/{len(results)} instances check out in {total:.0f} s "
          f"({total / max(1, len(results)):.1f} s per instance, concurrency {args.concurrency})")
    if args.json:
        args.json.write_text(json.dumps([c.as_dict() for c in results], indent=1) + "\n")
    return 0 if good == len(results) and results else 1


if __name__ == "__main__":
    sys.exit(main())
