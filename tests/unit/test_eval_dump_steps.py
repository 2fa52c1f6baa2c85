"""An evaluation of a multi-step agent: its metrics count trajectories (the last step sample of each), while the
dumped samples hold every step, so a run's files keep the commands an agent ran and not only its last reply."""
import argparse
import asyncio
import json

from slime.rollout import default_rollout as dr
from slime.training import loop
from slime.utils.types import Sample


def test_metrics_count_trajectories_and_the_dump_keeps_every_step(monkeypatch, tmp_path):
    def step(sample: Sample, k: int, solved: bool) -> Sample:
        s = Sample(prompt=sample.prompt, response=f"{sample.prompt} step {k}", group_index=sample.group_index,
                   index=sample.index, metadata={"task_key": sample.prompt, "turn_idx": k})
        s.reward = {"score": 1.0 if solved else -1.0, "acc": float(solved)}
        return s

    async def fake_group(args, group, params, evaluation=False, state=None):
        # prompt "a": two steps, solved; prompt "b": three steps, not solved
        return [[step(s, k, s.prompt == "a") for k in range(2 if s.prompt == "a" else 3)] for s in group]

    monkeypatch.setattr(dr, "generate_and_rm_group", fake_group)
    monkeypatch.setattr(dr, "_eval_datasets", lambda args: {"heldout": "unused"})
    monkeypatch.setattr(dr, "_eval_prompts", lambda args, path: [Sample(prompt="a"), Sample(prompt="b")])
    monkeypatch.setattr(dr, "sampling_params_from_args", lambda args, evaluation=False: {})
    monkeypatch.setattr(dr, "RolloutState", lambda args: None)
    args = argparse.Namespace(n_samples_per_eval_prompt=1, eval_reward_key="acc", reward_key="score")
    output = asyncio.run(dr.eval_rollout_async(args, 0))
    assert output.metrics["eval/heldout"] == 0.5  # one of two trajectories solved, not 2 of 5 steps
    result = output.data["heldout"]
    assert len(result["samples"]) == 2 and len(result["steps"]) == 5

    path = tmp_path / "heldout.jsonl"
    loop._dump_samples(str(path), loop.eval_samples_to_dump(result))
    dumped = [json.loads(line)["response"] for line in path.read_text().splitlines()]
    assert dumped == ["a step 0", "a step 1", "b step 0", "b step 1", "b step 2"]
