"""Verified demonstrations for a warm start: each training task solved by its scripted solution through the real
service and desktop, kept only when the task's evaluator scores it 1, written as SFT rows in the loop's own layout.

    python gui-rl/gui_demonstrations.py --split train --out gui-rl/data/sft_demos.jsonl
    python gui-rl/gui_demonstrations.py --tasks-dir DIR/tasks --data DIR/demos.jsonl --out demos.jsonl

Every step becomes one row (`slime.rollout.sft_rollout`'s format): `prompt` = the messages the loop rendered at
that step (the system prompt, the recent screens as text and responses, the current screen with the instruction and
the earlier actions), `metadata.segments` = the step's response (trained), `metadata.tools` = [computer_use]. The
screens are what the real desktop showed (the OCR text view), so SFT on these rows trains the tokens the loop
samples, on the observations the loop gives.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import tempfile
from pathlib import Path

from generate_with_gui import DEFAULT_HISTORY, AgentSettings, GuiEpisode, ScriptedGuiPolicy, run_episode

from slime.agentic.gui.actions import TOOL_PROFILES
from slime.agentic.gui.scripted import SolutionError, load_solution
from slime.agentic.gui.tasks import GuiTask, load_tasks, split_of

TASKS_DIR = Path(__file__).resolve().parent / "tasks"  # this folder's (a copy: its own)

logger = logging.getLogger(__name__)


class RecordingPolicy(ScriptedGuiPolicy):
    """The scripted policy, keeping the messages of every step."""

    def __init__(self, steps: list[dict]):
        super().__init__(steps)
        self.prompts: list[list[dict]] = []

    async def generate_turn(self, messages, tools=None):
        self.prompts.append([dict(m) for m in messages])
        return await super().generate_turn(messages, tools)


def sft_rows(task: GuiTask, episode: GuiEpisode, prompts: list[list[dict]], tools: list[dict]) -> list[dict]:
    return [{"prompt": prompt, "metadata": {"tools": tools, "segments": [{"text": step.turn.text, "loss": 1}],
                                            "task": task.key, "turn": k}}
            for k, (prompt, step) in enumerate(zip(prompts, episode.steps))]


async def demonstrate(env, tasks: list[GuiTask], concurrency: int = 2, history: int = DEFAULT_HISTORY,
                      tools: str = "upstream") -> tuple[list[dict], list[str]]:
    """(SFT rows of the tasks whose scripted solution scored 1, keys of those that did not); `history` and `tools`:
    each step's prompt as the policy trained on the rows will see it (`--gui-history`, `--gui-tools`)."""
    settings = AgentSettings(max_steps=30, history=history, tools=tools)
    slots = asyncio.Semaphore(concurrency)

    async def one(task: GuiTask):
        async with slots:
            policy = RecordingPolicy(load_solution(task))
            try:
                episode = await run_episode(policy, env, task.key, settings)
            except SolutionError as e:  # a target the screen's text view does not show: not demonstrable
                logger.warning("demonstration of %s: %s", task.key, str(e).splitlines()[0])
                return task, None, []
            return task, episode, policy.prompts

    rows, failed = [], []
    for task, episode, prompts in await asyncio.gather(*(one(t) for t in tasks)):
        if episode is not None and episode.reward == 1.0:
            rows.extend(sft_rows(task, episode, prompts, settings.tool_schemas))
        else:
            failed.append(task.key)
    return rows, failed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks-dir", type=Path, default=TASKS_DIR)
    parser.add_argument("--split", choices=["train", "heldout", "all"], default="train")
    parser.add_argument("--data", type=Path, default=None,
                        help="a prompt JSONL (`prompt` = domain/id per line): demonstrate these tasks, not a split")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--history", type=int, default=DEFAULT_HISTORY,
                        help="screens per step prompt, as the trained policy's --gui-history")
    parser.add_argument("--tools", choices=sorted(TOOL_PROFILES), default="upstream",
                        help="the tool profile, as the trained policy's --gui-tools")
    args = parser.parse_args(argv)
    from slime.agentic.env_service.client import EnvClient
    from slime.agentic.env_service.launch import EnvService
    from slime.agentic.env_service.settings import PoolSettings

    every = load_tasks(args.tasks_dir)
    tasks = [t for t in every if args.split == "all" or split_of(t) == args.split]
    if args.data is not None:
        keys = [json.loads(line)["prompt"] for line in args.data.read_text().splitlines() if line.strip()]
        by_key = {t.key: t for t in every}
        missing = [k for k in keys if k not in by_key]
        if missing:
            raise SystemExit(f"{args.data}: no task {missing[0]!r} under {args.tasks_dir}")
        tasks = [by_key[k] for k in keys]
    with tempfile.TemporaryDirectory(prefix="gui-demos-") as state, \
            EnvService(PoolSettings(provider="gui", state_dir=state,
                                    provider_options={"tasks_dir": str(args.tasks_dir)})) as service:
        async def go():
            async with EnvClient(service.url, service.api_key) as env:
                return await demonstrate(env, tasks, history=args.history, tools=args.tools)

        rows, failed = asyncio.run(go())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    print(f"{len(tasks) - len(failed)} of {len(tasks)} tasks demonstrated and verified, {len(rows)} SFT rows -> "
          f"{args.out}" + (f"; failed: {', '.join(failed)}" if failed else ""))


if __name__ == "__main__":
    main()
