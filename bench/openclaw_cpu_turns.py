"""How long a real OpenClaw turn takes against the main job on CPU, and whether it fits at all.

    python bench/openclaw_cpu_turns.py [--turns 4] [--keep DIR]

Starts the README's main job (`openclaw-combine/run_cpu_smollm2_openclaw_combine.sh`: SmolLM2-135M-Instruct,
8,192-token context, trainer + engines + proxy), then drives the stock OpenClaw client (`openclaw agent
--local`, installed by `scripts/setup_openclaw.sh`) with the config `python -m slime.conversation
openclaw-config` writes. Measured in the same run:

- baseline: OpenClaw's `full` profile (as it ships): prompt tokens of its request, and what the server answers;
- the `lean` profile: per turn, the prompt tokens the engine rendered, OpenClaw's wall time for the turn
  (node start-up included), the model's share of it, and how many prompt tokens the prefix cache served.

Last line: `RESULT openclaw_cpu_turn value=<median seconds of turns 2..n> target=<=60 PASS|FAIL`
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--keep", help="keep the run directory here (default: a temporary one)")
    args = parser.parse_args()

    from e2e.openclaw_harness import OpenClawClient, openclaw_available, openclaw_skip_reason
    from slime.conversation.launch import ConversationJob
    from slime.conversation.openclaw_config import describe_server

    if not openclaw_available():
        print(openclaw_skip_reason(), file=sys.stderr)
        return 2
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="openclaw-cpu-"))
    work.mkdir(parents=True, exist_ok=True)
    store_path = work / "run" / "conversations.db"
    job = ConversationJob("openclaw-combine/run_cpu_smollm2_openclaw_combine.sh", "--save-interval", "1000",
                          env={"RUN_DIR": str(work / "run"), "PRM_TYPE": "rules"}, log_path=work / "main.log")
    t0 = time.monotonic()
    with job:
        print(f"main job ready in {time.monotonic() - t0:.0f} s ({job.url})", flush=True)
        model_id, context = describe_server(job.url)
        # baseline: OpenClaw as it ships
        full = OpenClawClient(job.url, None, model_id, work / "openclaw-full", context_window=context,
                              max_tokens=512, lean=False, timeout=600)
        base = full.run_turn("bench-full", MESSAGES[0])
        time.sleep(1)
        rows = [t for t in stored_turns(store_path) if t.session_id == "openclaw:bench-full"]
        base_tokens = max((len(t.prompt_ids) for t in rows), default=None)
        base_error = (base.reply_text or base.stderr or base.stdout)[-300:].replace("\n", " ")
        print(f"full profile: rc={base.returncode} {base.wall_s:.1f} s, engine-rendered prompt tokens "
              f"{base_tokens if base_tokens else 'none stored (rejected before the engine)'}; "
              f"the client saw: {base_error!r}", flush=True)

        lean = OpenClawClient(job.url, None, model_id, work / "openclaw-lean", context_window=context,
                              max_tokens=512, lean=True, timeout=600)
        walls, model_ms = [], []
        for i in range(args.turns):
            turn = lean.run_turn("bench-lean", MESSAGES[i % len(MESSAGES)])
            turn.check()
            meta = (turn.json or {}).get("meta") or {}
            usage = (meta.get("agentMeta") or {}).get("usage") or {}
            walls.append(turn.wall_s)
            model_ms.append(meta.get("durationMs"))
            print(f"lean turn {i + 1}: {turn.wall_s:.1f} s wall, agent run {meta.get('durationMs')} ms, usage "
                  f"{json.dumps(usage)}, reply {turn.reply_text[:60]!r}", flush=True)
        time.sleep(1)
        for t in stored_turns(store_path):
            if t.session_id == "openclaw:bench-lean":
                print(f"  stored turn {t.turn_num} ({t.turn_type}): {len(t.prompt_ids)} prompt tokens, "
                      f"{len(t.response_ids)} response tokens, finish {t.finish_reason}")
    later = statistics.median(walls[1:]) if len(walls) > 1 else walls[0]
    print(f"first turn {walls[0]:.1f} s, later turns median {later:.1f} s (all: {[round(w, 1) for w in walls]})")
    verdict = "PASS" if later <= TARGET_S else "FAIL"
    print(f"RESULT openclaw_cpu_turn value={later:.1f} target=<={TARGET_S:.0f} {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
