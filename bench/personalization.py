"""Does the agent learn what it is told by being talked to? The headline benchmark of openclaw-test.

For every eligible persona (the model told with the hints our judge writes from the persona's corrections is
pleased at least 0.3 more often than untold, quality kept; measured by `python -m
personalization.base_rates`, committed as openclaw-test/results/eligibility.json, pooled with the committed
runs' own untold and told evaluations) and every seed, one
openclaw-test run (the Hydra config of `openclaw-test/run.py`, composed here with the same overrides): start the
default Combine server on SmolLM2-135M-Instruct, rate the base model untold and told on the held-out requests
(the baseline and the ceiling, measured in the same run), let the simulated user talk to it for 64 interactions,
wait for the trainer, rate again. The value is the share of the told gap closed,
`(pleased@N - pleased@0) / (pleased told - pleased@0)` per persona from the means over seeds, averaged over the
personas; the line before it gives the minimum over the hint-only personas (goal >= 0.4) and the mean quality
change (goal >= -0.05).

    OMP_NUM_THREADS=1 python bench/personalization.py [--personas upbeat,greeter] [--seeds 0,1,2]
        [--interactions 64] [--method combine] [--out runs/bench-personalization] [--reuse-finished]
        [hydra overrides...]

About 25 minutes per run on a 2-core CPU (three held-out evaluations of 120 replies each, 64 interactions; six runs
for the default personas and seeds). An evaluation keeps one core busy, so two invocations on disjoint personas or
seeds into the same --out, then one with --reuse-finished over all of them, finish in about two thirds of the time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "openclaw-test"))  # the simulated-user harness: openclaw-test/personalization/
ELIGIBILITY = ROOT / "openclaw-test" / "results" / "eligibility.json"
TARGET_GAP_CLOSED = 0.6
HINT_ONLY_GOAL = 0.4
MAX_QUALITY_DROP = 0.05


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "openclaw-test" / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


def base_rates(path: Path = ELIGIBILITY) -> list[dict]:
    return [json.loads(path.read_text())] if path.is_file() else []


def finished_result(run_dir: Path, config) -> dict | None:
    """The run's result.json when it finished with exactly this config (None otherwise: run it)."""
    from omegaconf import OmegaConf

    try:
        result = json.loads((run_dir / "result.json").read_text())
    except (OSError, ValueError):
        return None
    wanted = OmegaConf.to_container(config, resolve=True)
    return result if result.get("config") == wanted else None


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personas", default=None, help=f"default: the eligible ones in {ELIGIBILITY.name}")
    parser.add_argument("--method", default="combine_head",
                        help="an openclaw-test method config (default: combine_head, the default Combine there)")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--interactions", type=int, default=64)
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench-personalization"))
    parser.add_argument("--reuse-finished", action="store_true",
                        help="reuse a run folder's result.json when its recorded config equals this run's (resume "
                             "after an interruption)")
    parser.add_argument("overrides", nargs="*", help="more Hydra overrides, e.g. trainer.lr=2e-5")
    args = parser.parse_args(argv)

    from personalization.report import eligibility, gap_headline, load_results, method_label
    from personalization.runner import run_experiment

    # eligibility as the README's table measures it: the committed base rates pooled with the committed runs
    measured = base_rates()
    committed = load_results(ELIGIBILITY.parent)
    personas = args.personas.split(",") if args.personas else \
        [name for name, row in eligibility(committed, measured).items() if row["eligible"]]
    if not personas:
        print(f"no eligible persona in {ELIGIBILITY.name}; name some with --personas")
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"personas: {', '.join(personas)}; seeds {seeds}; {args.method}; {args.interactions} interactions",
          flush=True)
    results, started = [], time.monotonic()
    for persona in personas:
        for seed in seeds:
            config = compose([f"method={args.method}", f"model={args.model}", f"persona={persona}", f"seed={seed}",
                              f"checkpoints=[{args.interactions}]", *args.overrides])
            run_dir = Path(args.out) / f"{args.method}-{persona}-seed{seed}"
            result = finished_result(run_dir, config) if args.reuse_finished else None
            if result is not None:
                print(f"{persona}/seed {seed}: reusing the finished run in {run_dir}", flush=True)
            else:
                result = run_experiment(config, run_dir)
            results.append(result)
            before, after = result["curve"][0], result["curve"][-1]
            print(f"{persona}/seed {seed}: pleased {before['pleased']:.3f} -> {after['pleased']:.3f} (told "
                  f"{result['base_with_hint']['pleased']:.3f}), quality {before['quality']:.3f} -> "
                  f"{after['quality']:.3f} ({result['wall_seconds'] / 60:.1f} min)", flush=True)
    rows = eligibility(results, measured)
    for persona in personas:
        runs = [r for r in results if r["persona"] == persona]
        at = [r["curve"][-1] for r in runs]
        row = rows.get(persona, {})
        print(f"{persona:10s} pleased @0 {row.get('untold_pleased', float('nan')):.3f}  told "
              f"{row.get('told_pleased', float('nan')):.3f}  @{args.interactions} "
              f"{statistics.mean(p['pleased'] for p in at):.3f}; quality @0 {row.get('untold_quality', float('nan')):.3f} "
              f"told {row.get('told_quality', float('nan')):.3f} @{args.interactions} "
              f"{statistics.mean(p['quality'] for p in at):.3f}{'  (hint-only)' if row.get('hint_only') else ''}")
    label = method_label(results[0]) if results else args.method  # e.g. "combine_topk [fwd-head4]"
    headline = gap_headline(results, label, args.interactions, personas=personas, base_rates=measured)
    print("per persona share of the gap closed: "
          + ", ".join(f"{p} {v:.3f}" for p, v in headline["per_persona"].items())
          + (f"; no share (these runs' told gap under 0.3): {', '.join(headline['skipped'])}"
             if headline["skipped"] else ""))
    print(f"hint-only minimum {headline['hint_only_min']:.3f} (goal >= {HINT_ONLY_GOAL}); mean quality change "
          f"{headline['quality_change']:+.3f} (goal >= {-MAX_QUALITY_DROP}); {len(results)} run(s), "
          f"{(time.monotonic() - started) / 60:.1f} min")
    value = headline["gap_closed"]
    verdict = "PASS" if value >= TARGET_GAP_CLOSED else "FAIL"
    print(f"RESULT personalization value={value:.3f} target=>={TARGET_GAP_CLOSED} {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
