"""openclaw-test: does the agent get better by talking to it? One run per composed config (Hydra).

    python openclaw-test/run.py                                    # combine, SmolLM2, concise, seed 0
    python openclaw-test/run.py method=rl persona=student seed=2   # any group choice or value overridden
    python openclaw-test/run.py -m method=rl,opd,combine persona=student,teacher seed=0,1,2   # multirun
    python openclaw-test/run.py server.url=http://127.0.0.1:30000  # attach to a server you started

Each run writes result.json, interactions.jsonl, eval_<n>.jsonl, curve.png and server.log to its Hydra output
directory (runs/openclaw-test/...). `python -m personalization.report runs/openclaw-test` makes the table.
"""

from __future__ import annotations

import os

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

os.environ.setdefault("OMP_NUM_THREADS", "1")


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    from personalization.runner import run_experiment

    out_dir = HydraConfig.get().runtime.output_dir
    result = run_experiment(cfg, out_dir)
    first, last = result["curve"][0], result["curve"][-1]
    print(f"{result['persona']}/{result['method']}/seed {result['seed']}: preference {first['preference']:.3f} -> "
          f"{last['preference']:.3f}, quality {first['quality']:.3f} -> {last['quality']:.3f} after "
          f"{last['interactions']} interactions ({result['wall_seconds'] / 60:.1f} min); {out_dir}/result.json")
    return last["preference"] - first["preference"]


if __name__ == "__main__":
    main()
