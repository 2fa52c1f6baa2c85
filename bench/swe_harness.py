"""The SWE harness: resolve rates on the shipped instances, each measured in this run, with wall time per episode.

    OMP_NUM_THREADS=1 python bench/swe_harness.py [--model smollm2] [--rl-rollouts 2] [--eval-instances 6]
        [--eval-steps 6] [--skip-model]

(a) **gold**: every instance's gold patch through the sealed evaluation (a fresh tree, the patch rules, exactly
    FAIL_TO_PASS + PASS_TO_PASS in the bubblewrap sandbox): the harness itself must resolve all of them;
(b) **scripted**: the baseline agent that knows the fix applies the gold patch with `git apply` through the bash loop
    and submits (`swe.agent.gold_patch_responses`), one episode per instance through the environment service (a pool
    server of the `swe` provider), evaluated in a fresh tree: the loop, the submission and the evaluation together;
(c) **model**: `swe-rl/run_cpu_smollm2_swe.sh` as a user runs it, `--rl-rollouts` rollouts (2 instances x 4
    episodes each), evaluated through the agent loop before and after training on the first `--eval-instances`
    instances (one episode each at temperature 1.0, at most `--eval-steps` steps). A 135M model is not expected to
    fix real bugs: its numbers are reported as they are. `--model tiny` runs (c) with the tiny random model (a smoke
    run of the harness); `--skip-model` leaves (c) out.

Last line: `RESULT swe_harness value=<gold resolve rate> target=>=1.0 PASS|FAIL`.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

from train_stages import REPO, episodes, eval_sample_files, run_stage, summarize

sys.path.insert(0, str(REPO / "slime"))
sys.path.insert(0, str(REPO / "swe-rl"))  # the SWE loop: swe-rl/generate_with_swe_remote.py

from slime.agentic.env_service.client import EnvClient  # noqa: E402
from slime.agentic.env_service.launch import PoolServerProcess  # noqa: E402
from slime.agentic.env_service.settings import PoolSettings  # noqa: E402
import generate_with_swe_remote as swe_agent  # noqa: E402  (swe-rl's loop)
from slime.agentic.swe.evaluate import evaluate_patch  # noqa: E402
from slime.agentic.swe.instances import load_instances, write_training_rows  # noqa: E402
from slime.agentic.swe.provider import DEFAULT_INSTANCES  # noqa: E402

TARGET = 1.0


def gold(instances) -> tuple[float, float]:
    """(resolve rate of the gold patches, seconds per instance): one sealed evaluation each (the check's empty-patch
    and base runs are `python -m slime.agentic.swe.check`'s job, not this count's)."""
    async def run_all() -> list:
        return [await evaluate_patch(inst, inst.patch) for inst in instances]

    started = time.monotonic()
    results = asyncio.run(run_all())
    for inst, result in zip(instances, results):
        if not result.resolved:
            print(f"  gold not resolved: {inst.instance_id}: {result.reason}", flush=True)
    return sum(r.resolved for r in results) / len(instances), (time.monotonic() - started) / len(instances)


def scripted(instances, state_dir: str) -> tuple[float, float]:
    """(resolve rate of the gold-patch agent through the loop and the service, seconds per episode)."""
    settings = PoolSettings(provider="swe", state_dir=state_dir,
                            provider_options={"instances": str(DEFAULT_INSTANCES)})

    async def run_all(url: str) -> list:
        async with EnvClient(url) as client:
            out = []
            for inst in instances:  # one at a time: the wall time is one episode's
                policy = swe_agent.ScriptedSwePolicy(swe_agent.gold_patch_responses(inst.patch))
                episode = await swe_agent.run_episode(policy, client, inst.instance_id,
                                                      swe_agent.AgentSettings(max_steps=4),
                                                      request_id=f"harness:{inst.instance_id}")
                out.append(episode.resolved and episode.patch_source == "submitted")
                if not out[-1]:
                    print(f"  scripted not resolved: {inst.instance_id}: {episode.exit_status} "
                          f"{episode.patch_source} {episode.evaluation}", flush=True)
            return out

    started = time.monotonic()
    with PoolServerProcess(settings) as pool:
        results = asyncio.run(run_all(pool.url))
    return sum(results) / len(results), (time.monotonic() - started) / len(results)


def model_stage(opts, instances, out: Path) -> dict:
    """Train `--rl-rollouts` rollouts with the CPU script, evaluating before and after on the first instances."""
    heldout = out / "eval_instances.jsonl"
    write_training_rows(DEFAULT_INSTANCES, heldout, [i.instance_id for i in instances[:opts.eval_instances]])
    run_dir = out / "rl"
    seconds = run_stage("rl", "swe-rl/run_cpu_smollm2_swe.sh",
                        {"RUN_DIR": str(run_dir), "HF_CKPT": opts.model, "NUM_ROLLOUT": str(opts.rl_rollouts),
                         "MAX_STEPS": str(opts.eval_steps)},
                        ["--eval-prompt-data", "heldout", str(heldout), "--eval-temperature", "1.0",
                         "--n-samples-per-eval-prompt", "1", "--eval-interval", str(opts.rl_rollouts),
                         "--eval-reward-key", "acc", "--save-interval", str(opts.rl_rollouts)],
                        out / "rl.log")
    files = eval_sample_files(run_dir)
    if len(files) != 2:
        raise SystemExit(f"expected an evaluation before and after training in {run_dir}, found {len(files)}")
    before, after = (summarize(episodes(f, key_field="instance_id")) for f in files)
    return {"before": before["success"], "after": after["success"], "episodes": before["episodes"], "seconds": seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="(c)'s policy (tiny: a smoke run)")
    parser.add_argument("--rl-rollouts", type=int, default=2)
    parser.add_argument("--eval-instances", type=int, default=6)
    parser.add_argument("--eval-steps", type=int, default=6, help="steps per episode (MAX_STEPS) in training and evaluation")
    parser.add_argument("--skip-model", action="store_true", help="only (a) and (b)")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench" / "swe_harness")
    opts = parser.parse_args()
    shutil.rmtree(opts.out, ignore_errors=True)
    opts.out.mkdir(parents=True)
    instances = load_instances(DEFAULT_INSTANCES)

    gold_rate, gold_s = gold(instances)
    print(f"(a) gold patches: {gold_rate:.3f} resolved of {len(instances)} ({gold_s:.1f} s per instance)", flush=True)
    with tempfile.TemporaryDirectory(prefix="swe-harness-") as state:
        scripted_rate, scripted_s = scripted(instances, state)
    print(f"(b) scripted gold-patch agent through the loop: {scripted_rate:.3f} resolved of {len(instances)} "
          f"({scripted_s:.1f} s per episode)", flush=True)
    if not opts.skip_model:
        m = model_stage(opts, instances, opts.out)
        print(f"(c) {opts.model}: {m['before']:.3f} resolved before -> {m['after']:.3f} after {opts.rl_rollouts} "
              f"rollouts ({m['episodes']} evaluation episodes each, at most {opts.eval_steps} steps; the whole stage "
              f"{m['seconds']:.0f} s)", flush=True)
    print(f"RESULT swe_harness value={gold_rate:.3f} target=>={TARGET} {'PASS' if gold_rate >= TARGET else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
