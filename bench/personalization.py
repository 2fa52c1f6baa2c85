"""Does the agent get better by talking to it? The headline configuration of openclaw-test.

For every persona, one openclaw-test run (the same Hydra config as `openclaw-test/run.py`, composed here with
the same overrides): start the Combine server on SmolLM2-135M-Instruct, rate the base model on the held-out
requests (the baseline, measured in the same run), let the simulated user talk to it for 64 interactions,
wait for the trainer, rate again. The value is the mean over personas of the held-out preference gain; the
quality change is printed on the line before, and a drop beyond 0.05 fails the benchmark too.

    OMP_NUM_THREADS=1 python bench/personalization.py [--personas student,teacher,concise,greeter,upbeat] [--seed 0]
        [--interactions 64] [--out runs/bench-personalization] [hydra overrides...]

About 15-20 minutes per persona on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_GAIN = 0.3
MAX_QUALITY_DROP = 0.05


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "openclaw-test" / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personas", default="student,teacher,concise,greeter,upbeat")
    parser.add_argument("--method", default="combine")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--interactions", type=int, default=64)
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench-personalization"))
    parser.add_argument("overrides", nargs="*", help="more Hydra overrides, e.g. trainer.lr=2e-5")
    args = parser.parse_args(argv)

    from slime.personalization.runner import run_experiment

    gains, quality_changes, started = [], [], time.monotonic()
    for persona in args.personas.split(","):
        config = compose([f"method={args.method}", f"model={args.model}", f"persona={persona}",
                          f"seed={args.seed}", f"checkpoints=[{args.interactions}]", *args.overrides])
        result = run_experiment(config, Path(args.out) / f"{args.method}-{persona}-seed{args.seed}")
        before, after = result["curve"][0], result["curve"][-1]
        gains.append(after["preference"] - before["preference"])
        quality_changes.append(after["quality"] - before["quality"])
        print(f"{persona}: preference {before['preference']:.3f} -> {after['preference']:.3f}, quality "
              f"{before['quality']:.3f} -> {after['quality']:.3f} ({result['wall_seconds'] / 60:.1f} min)",
              flush=True)
    gain, quality = statistics.mean(gains), statistics.mean(quality_changes)
    print(f"mean quality change at {args.interactions} interactions: {quality:+.3f} (allowed >= {-MAX_QUALITY_DROP}); "
          f"{len(gains)} persona(s), {(time.monotonic() - started) / 60:.1f} min")
    verdict = "PASS" if gain >= TARGET_GAIN and quality >= -MAX_QUALITY_DROP else "FAIL"
    print(f"RESULT personalization value={gain:.3f} target=>={TARGET_GAIN} {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
