"""Verified demonstrations for a warm start: each training task solved by a scripted agent through the real service
and shell tools, kept only when the task's tests pass, written as SFT rows in the turn loop's own layout.

    python terminal-rl/terminal_demonstrations.py --data terminal-rl/data/train.jsonl \\
        --out terminal-rl/data/sft_demos.jsonl

The scripted agent looks at `/app` (`ls -la`), then types the task's `solution.sh` into a shell session as one
multi-line `shell_exec` (the shebang dropped; the script runs in a subshell, so a `set -e` or an `exit` in it cannot
end the session), then answers in one sentence. Every model turn becomes one row (`slime.rollout.sft_rollout`'s
format): `prompt` = the messages the loop would render at that turn (system prompt, task, earlier turns and tool
results), `metadata.segments` = the turn's text (trained), `metadata.tools` = the tool schemas the service declared.
So SFT on these rows trains exactly the tokens the loop samples, with the observations the real tools returned.
SmolLM2-135M-Instruct as shipped writes no tool call at all here (terminal-rl/README.md), as it did in the tool-call
setting before its warm start.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path

from generate import AgentSettings, Episode, run_episode, system_prompt_for

from slime.agentic.agent_loop import ScriptedTurnPolicy, tool_call_text
from slime.agentic.terminal.tasks import TerminalTask, load_task

TASKS_DIR = Path(__file__).resolve().parent / "tasks"  # this folder's (a copy: its own)

FINAL_ANSWER = "The task is done: I ran the commands above in /app and they finished without errors."


def solution_command(task: TerminalTask) -> str:
    """The body of solution.sh as one command typed into the shell, in a subshell."""
    if task.solution_script is None:
        raise ValueError(f"task {task.name!r} has no solution.sh")
    lines = task.solution_script.read_text().splitlines()
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    body = "\n".join(lines).strip("\n")
    return f"(\n{body}\n)"


def lean_command(task: TerminalTask) -> str:
    """The lean profile's command: a one-line solution as it is (nothing in it can end the session), anything
    longer in a subshell as `solution_command`."""
    command = solution_command(task)
    body = command[2:-2]
    if "\n" not in body and not re.search(r"\b(exit|set|exec)\b", body):
        return body
    return command


def demonstration_turns(task: TerminalTask, session: str = "main", tools: str = "upstream") -> list[str]:
    """The scripted agent's turns. `upstream`: look at /app, then the solution; `lean` (shell_exec with a command
    only): the solution at once, the cheapest trajectory to train on (one tool turn and the answer)."""
    if tools == "lean":
        return [tool_call_text("shell_exec", {"command": lean_command(task)}, "I run the commands that do the task.")]
    return [
        tool_call_text("shell_exec", {"id": session, "command": "ls -la /app"},
                       "Let me look at the working directory first."),
        tool_call_text("shell_exec", {"id": session, "command": solution_command(task), "block": True,
                                      "timeout": 60}, "Now I run the commands that do the task."),
    ]


def sft_rows(episode: Episode, tools: list[dict], task_name: str) -> list[dict]:
    """One SFT row per assistant turn: the messages before it as the prompt, its text as the trained segment."""
    rows = []
    for i, message in enumerate(episode.messages):
        if message["role"] != "assistant":
            continue
        rows.append({"prompt": episode.messages[:i],
                     "metadata": {"tools": tools, "segments": [{"text": message["content"], "loss": 1}],
                                  "task": task_name, "turn": sum(m["role"] == "assistant"
                                                                 for m in episode.messages[:i])}})
    return rows


async def demonstrate(env, tasks: list[TerminalTask], concurrency: int = 4,
                      tools: str = "upstream") -> tuple[list[dict], list[str]]:
    """(SFT rows of the tasks whose demonstration passed every test, names of those that did not). `tools`: the
    service's tool profile (the turns and the system prompt follow it)."""
    slots = asyncio.Semaphore(concurrency)
    tools_seen: dict[str, list[dict]] = {}

    async def one(task: TerminalTask):
        async with slots:
            meta = {"task_name": task.name, "task_path": task.name}

            class Recording(ScriptedTurnPolicy):
                async def generate_turn(self, messages, tools):
                    tools_seen.setdefault(task.name, tools)
                    return await super().generate_turn(messages, tools)

            policy = Recording(demonstration_turns(task, tools=tools), final=FINAL_ANSWER)
            settings = AgentSettings(system_prompt=system_prompt_for(tools))
            return task, await run_episode(policy, env, f"{task.name}:{task.name}", meta, settings)

    rows, failed = [], []
    for task, episode in await asyncio.gather(*(one(t) for t in tasks)):
        if episode.status == "completed" and episode.reward == 1.0:
            rows.extend(sft_rows(episode, tools_seen[task.name], task.name))
        else:
            failed.append(task.name)
    return rows, failed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a task JSONL ({'task': {task_name, task_path, ...}} lines)")
    parser.add_argument("--tasks-dir", default=str(TASKS_DIR))
    parser.add_argument("--out", required=True)
    parser.add_argument("--env-server-url", default=None, help="default: a pool server started here")
    parser.add_argument("--tools", choices=["upstream", "lean"], default="upstream",
                        help="the tool profile (the pool server started here declares it; an attached service must "
                             "have been started with the same)")
    args = parser.parse_args(argv)
    from slime.agentic.env_service.client import EnvClient
    from slime.agentic.env_service.launch import EnvService
    from slime.agentic.env_service.settings import PoolSettings

    root = Path(args.tasks_dir)
    tasks = [load_task(root / json.loads(line)["task"]["task_path"])
             for line in Path(args.data).read_text().splitlines() if line.strip()]
    import tempfile

    with tempfile.TemporaryDirectory(prefix="terminal-demos-") as state, \
            EnvService(PoolSettings(provider="terminal", state_dir=state, provider_options={"tasks_dir": str(root), "tools": args.tools}),
                       url=args.env_server_url) as service:
        async def go():
            async with EnvClient(service.url, service.api_key) as env:
                return await demonstrate(env, tasks, tools=args.tools)

        rows, failed = asyncio.run(go())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(f"{len(tasks) - len(failed)} of {len(tasks)} tasks demonstrated and verified, {len(rows)} SFT rows -> {out}"
          + (f"; failed: {', '.join(failed)}" if failed else ""))


if __name__ == "__main__":
    main()
