"""How long a real OpenClaw turn takes against the main job on CPU, with OpenClaw as it ships and with its lean
settings for small local models.

    python bench/openclaw_cpu_turns.py [--turns 4] [--model smollm2|qwen2.5-coder-0.5b] [--keep DIR]

Starts the README's main job (`openclaw-combine/run_cpu_smollm2_openclaw_combine.sh`: trainer + engines + proxy; the
model's own context, 8,192 tokens for SmolLM2-135M-Instruct, 32,768 for Qwen2.5-Coder-0.5B-Instruct), then drives
the stock OpenClaw client (`openclaw agent --local`, installed by `scripts/setup_openclaw.sh`) with the config
`python -m slime.conversation openclaw-config` writes, `--turns` turns of one session per profile:

- `full`: OpenClaw as it ships (its ~14k-token system prompt and 12 tool schemas); SmolLM2's 8k context refuses
  its first request, which is reported and ends that profile;
- `lean`: OpenClaw's settings for small local models (no workspace files, skills or tool catalogue in the prompt).

Per turn: OpenClaw's wall time (node start-up included), the agent run's time, the prompt tokens the engine
rendered and how many the prefix cache served. The profile `openclaw-config --profile auto` picks for this model's
context (lean below 16k) is the default; the last line is about it:
`RESULT openclaw_cpu_turn value=<median seconds of its turns 2..n> target=<=60 PASS|FAIL`
(a person waits for each reply; a minute on a 2-core machine is the most we accept).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

TARGET_S = 60.0
MESSAGES = [
    "Hi! What is a good name for a small black cat?",
    "thanks, that is a nice one. Can you suggest one more?",
    "great. And a name for a white dog?",
    "perfect, thank you",
    "one more: a name for a goldfish?",
    "thanks!",
]


def stored_turns(store_path: Path) -> list:
    from slime.conversation.store import ConversationStore

    store = ConversationStore(store_path)
    try:
        return list(reversed(store.recent_turns(1000)))
    finally:
        store.close()


def run_profile(job, store_path: Path, work: Path, model_id: str, context: int, lean: bool, turns: int) -> dict:
    """`turns` turns of one OpenClaw session under one profile; what each took."""
    from e2e.openclaw_harness import OpenClawClient

    name = "lean" if lean else "full"
    client = OpenClawClient(job.url, None, model_id, work / f"openclaw-{name}", context_window=context,
                            max_tokens=512, lean=lean, timeout=1200)
    walls, error = [], ""
    for i in range(turns):
        turn = client.run_turn(f"bench-{name}", MESSAGES[i % len(MESSAGES)])
        if turn.returncode != 0 or not turn.reply_text:
            error = (turn.reply_text or turn.stderr or turn.stdout)[-300:].replace("\n", " ")
            print(f"{name} turn {i + 1}: rc={turn.returncode} after {turn.wall_s:.1f} s; the client saw: {error!r}",
                  flush=True)
            break
        meta = (turn.json or {}).get("meta") or {}
        usage = (meta.get("agentMeta") or {}).get("usage") or {}
        walls.append(turn.wall_s)
        print(f"{name} turn {i + 1}: {turn.wall_s:.1f} s wall, agent run {meta.get('durationMs')} ms, usage "
              f"{json.dumps(usage)}, reply {turn.reply_text[:60]!r}", flush=True)
    time.sleep(1)
    stored = [t for t in stored_turns(store_path) if t.session_id == f"openclaw:bench-{name}"]
    for t in stored:
        print(f"  {name} stored turn {t.turn_num} ({t.turn_type}): {len(t.prompt_ids)} prompt tokens, "
              f"{len(t.response_ids)} response tokens, finish {t.finish_reason}", flush=True)
    later = statistics.median(walls[1:]) if len(walls) > 1 else (walls[0] if walls else None)
    return {"walls": walls, "later": later, "error": error,
            "first_prompt_tokens": min((len(t.prompt_ids) for t in stored), default=None)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=4, help="turns of one session per profile")
    parser.add_argument("--model", default="smollm2", help="the main job's model, by name or folder")
    parser.add_argument("--keep", help="keep the run directory here (default: a temporary one)")
    args = parser.parse_args()

    from e2e.openclaw_harness import openclaw_available, openclaw_skip_reason
    from slime.conversation.launch import ConversationJob
    from slime.conversation.openclaw_config import LEAN_BELOW_CONTEXT, describe_server

    if not openclaw_available():
        print(openclaw_skip_reason(), file=sys.stderr)
        return 2
    # absolute: OpenClaw runs in its workspace, where a relative config path would name nothing
    work = Path(args.keep).resolve() if args.keep else Path(tempfile.mkdtemp(prefix="openclaw-cpu-"))
    work.mkdir(parents=True, exist_ok=True)
    store_path = work / "run" / "conversations.db"
    job = ConversationJob("openclaw-combine/run_cpu_smollm2_openclaw_combine.sh", "--save-interval", "1000",
                          "--hf-checkpoint", args.model,
                          env={"RUN_DIR": str(work / "run"), "PRM_TYPE": "rules"}, log_path=work / "main.log")
    t0 = time.monotonic()
    results = {}
    with job:
        print(f"main job ready in {time.monotonic() - t0:.0f} s ({job.url})", flush=True)
        model_id, context = describe_server(job.url)
        for lean in (False, True):
            results["lean" if lean else "full"] = run_profile(job, store_path, work, model_id, context, lean,
                                                              args.turns)
    for name, r in results.items():
        if r["walls"]:
            print(f"{name}: first request {r['first_prompt_tokens']} prompt tokens; first turn {r['walls'][0]:.1f} s, "
                  f"later turns median {r['later']:.1f} s (all: {[round(w, 1) for w in r['walls']]})")
        else:
            print(f"{name}: no turn completed ({r['error']!r})")
    default = "lean" if context < LEAN_BELOW_CONTEXT else "full"
    later = results[default]["later"]
    if later is None:
        print(f"RESULT openclaw_cpu_turn value=nan target=<={TARGET_S:.0f} FAIL")
        return 1
    print(f"{model_id}, context {context}: the default profile is {default}")
    verdict = "PASS" if later <= TARGET_S else "FAIL"
    print(f"RESULT openclaw_cpu_turn value={later:.1f} target=<={TARGET_S:.0f} {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
