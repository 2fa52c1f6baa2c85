"""The top-K distillation and Combine losses train through the fsdp actor, full-weight and LoRA alike.

The fsdp path, full-weight and LoRA, computes the `--loss-type custom_loss` plugin's loss (it must never
fall back to the plain policy loss), and a few top-K steps must move the student towards its teacher on
positions it was not trained on. Steps go through `slime.training.loop.train_on_rollout`, the function
`slime/train.py` calls, on the tiny random Qwen3 (a process group of one, in this process).
"""

from __future__ import annotations

import random

import pytest
import torch

from slime.utils import distill

TEMPERATURE = 0.8
TOPK = 8
LORA = ("--use-lora", "--lora-rank", "4", "--lora-alpha", "8")
TOPK_LOSS = ("--loss-type", "custom_loss", "--custom-loss-function-path",
             "slime.utils.loss.topk_distillation_loss_function", "--distill-topk", str(TOPK),
             "--disable-compute-advantages-and-returns")
COMBINE_LOSS = ("--loss-type", "custom_loss", "--custom-loss-function-path", "combine_loss.combine_loss_function",
                "--eps-clip-high", "0.28")




pytestmark = pytest.mark.usefixtures("clean_distill_env")


def make_args(*flags: str, lr: str = "1e-2"):
    from slime.utils.arguments import parse_args

    return parse_args(["--hf-checkpoint", "tiny", "--rollout-batch-size", "8", "--num-rollout", "1",
                       "--disable-rollout-global-dataset", "--lr", lr, "--adam-eps", "1e-3",
                       "--use-dynamic-batch-size", "--max-tokens-per-gpu", "60",
                       "--rollout-temperature", str(TEMPERATURE), "--advantage-estimator", "grpo",
                       "--disable-rewards-normalization", *flags], world_size=1)


def make_actor(args, dist_info, tiny_model_path):
    from transformers import AutoTokenizer

    from slime.backends.fsdp.actor import FSDPActor

    return FSDPActor(args, dist_info, tiny_model_path, AutoTokenizer.from_pretrained(tiny_model_path))


def random_rows(seed: int, n: int = 8) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        prompt, response = rng.randint(4, 12), rng.randint(3, 9)
        rows.append({"tokens": [rng.randrange(4000) for _ in range(prompt + response)], "response_length": response,
                     "loss_mask": [1] * response, "reward": [1.0, -1.0, 0.0][i % 3], "rollout_log_probs": None,
                     "group_index": i, "index": i})
    return rows


@torch.no_grad()
def response_logits(model, row) -> torch.Tensor:
    """`[R, V]` logits predicting the row's response tokens, divided by the trainer's temperature."""
    n, r = len(row["tokens"]), row["response_length"]
    logits = model(input_ids=torch.tensor([row["tokens"]])).logits[0].float()
    return logits[n - r - 1 : n - 1] / TEMPERATURE


def attach_teacher(teacher, rows: list[dict]) -> None:
    """What the teacher scoring step provides: sampled-token log-probs and the teacher's own top-K."""
    for row in rows:
        log_probs = torch.log_softmax(response_logits(teacher, row), -1)
        response = torch.tensor(row["tokens"][-row["response_length"]:])
        row["teacher_log_probs"] = log_probs.gather(-1, response.unsqueeze(-1)).squeeze(-1).tolist()
        values, indices = log_probs.topk(TOPK, dim=-1)
        row["teacher_topk_log_probs"], row["teacher_topk_indices"] = values.tolist(), indices.tolist()


def mean_topk_kl(model, rows: list[dict]) -> float:
    """(1/B) sum_i mean_t KL_t: what the top-K loss reports as `kl_loss`, by direct per-row forwards."""
    per_sample = [
        distill.topk_reverse_kl(response_logits(model, row), torch.tensor(row["teacher_topk_log_probs"]),
                                torch.tensor(row["teacher_topk_indices"])).mean().item()
        for row in rows
    ]
    return sum(per_sample) / len(per_sample)


@pytest.fixture(scope="module")
def teacher(tiny_model_path):
    """A perturbed copy of the tiny model: a rank-2 change to every attention output and MLP down
    projection. A systematic difference that carries to new inputs, and one a rank-4 LoRA on those
    modules can represent, so the LoRA path has something to learn too."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for layer in model.model.layers:
            for linear in (layer.mlp.down_proj, layer.self_attn.o_proj):
                out_features, in_features = linear.weight.shape
                u, v = torch.randn(out_features, 2, generator=g), torch.randn(2, in_features, generator=g)
                linear.weight.add_(u @ v / in_features**0.5)
    return model


def fresh_rows(teacher, seed=0):
    rows = random_rows(seed)
    attach_teacher(teacher, rows)
    return rows


def train(args, actor, rows, dist_info) -> dict:
    from slime.training.loop import train_on_rollout

    (metrics,) = train_on_rollout(args, actor, [dict(r) for r in rows], dist_info)
    return metrics


def trainable_state(actor) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in actor.model.named_parameters() if v.requires_grad}


# ------------------------------------------------------------------------------------------------


def test_topk_loss_is_what_trains_and_matches_a_direct_computation(dist_info, tiny_model_path, tiny_model, teacher):
    rows = fresh_rows(teacher)
    args = make_args(*TOPK_LOSS)
    actor = make_actor(args, dist_info, tiny_model_path)
    metrics = train(args, actor, rows, dist_info)
    expected = mean_topk_kl(tiny_model[0], rows)
    assert metrics["train/kl_loss"] == pytest.approx(expected, rel=1e-5)
    assert metrics["train/loss"] == metrics["train/kl_loss"]
    assert metrics["train/teacher_topk_invalid_frac"] == 0
    assert "train/pg_loss" not in metrics  # not the built-in PPO loss
    assert metrics["train/grad_norm"] > 0


@pytest.mark.parametrize("loss", ["topk", "combine"])
def test_lora_path_computes_the_same_loss_as_the_full_weight_path(dist_info, tiny_model_path, teacher, loss):
    """LoRA's B matrices start at zero, so step 0 runs the same forward: the same custom loss must come out."""
    rows = fresh_rows(teacher)
    flags = TOPK_LOSS if loss == "topk" else COMBINE_LOSS
    results = {}
    for name, extra in (("full", ()), ("lora", LORA)):
        args = make_args(*flags, *extra)
        actor = make_actor(args, dist_info, tiny_model_path)
        before = trainable_state(actor)
        results[name] = train(args, actor, rows, dist_info)
        after = trainable_state(actor)
        assert any(not torch.equal(before[k], after[k]) for k in before), f"{name}: no weight moved"
        if name == "lora":
            assert all("lora_" in k for k in before)  # only the adapter trains
    keys = ("train/loss", "train/kl_loss", "train/entropy_loss") if loss == "topk" else \
        ("train/loss", "train/pg_loss", "train/pg_clipfrac", "train/opd_advantage_mean", "train/advantage_mean")
    for key in keys:
        assert results["lora"][key] == pytest.approx(results["full"][key], rel=1e-5, abs=1e-7), key
    if loss == "combine":  # the OPD signal is present (upstream's LoRA path dropped it)
        assert results["lora"]["train/opd_advantage_mean"] != 0


def test_combine_plugin_is_what_trains(dist_info, tiny_model_path, tiny_model, teacher):
    """With w_opd = 0 the Combine plugin steps exactly like the built-in PPO loss; with w_opd = 1 it does not."""
    rows = fresh_rows(teacher)

    def step(*flags, **weights):
        args = make_args(*flags)
        for name, value in weights.items():
            setattr(args, name, value)  # as --combine-w-rl / --combine-w-opd would
        actor = make_actor(args, dist_info, tiny_model_path)
        metrics = train(args, actor, rows, dist_info)
        return trainable_state(actor), metrics

    builtin, builtin_metrics = step()
    rl_only, rl_metrics = step(*COMBINE_LOSS[:-2], combine_w_rl=1.0, combine_w_opd=0.0)
    combined, combined_metrics = step(*COMBINE_LOSS[:-2], combine_w_rl=1.0, combine_w_opd=1.0)
    assert all(torch.equal(builtin[k], rl_only[k]) for k in builtin)
    assert rl_metrics["train/pg_loss"] == builtin_metrics["train/pg_loss"]
    assert any(not torch.equal(builtin[k], combined[k]) for k in builtin)
    # the OPD term is teacher - old with old recomputed by the actor at the rollout temperature
    expected = sum(
        (torch.tensor(row["teacher_log_probs"]) - torch.log_softmax(response_logits(tiny_model[0], row), -1).gather(
            -1, torch.tensor(row["tokens"][-row["response_length"]:]).unsqueeze(-1)).squeeze(-1)).mean().item()
        for row in rows) / len(rows)
    assert combined_metrics["train/opd_advantage_mean"] == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_topk_steps_lower_the_held_out_kl_to_the_teacher(dist_info, tiny_model_path, teacher, lora):
    train_rows, held_out = fresh_rows(teacher, seed=0), fresh_rows(teacher, seed=1)
    args = make_args(*TOPK_LOSS, *(LORA if lora else ()), lr="2e-2")
    actor = make_actor(args, dist_info, tiny_model_path)
    before = mean_topk_kl(actor.hf_model, held_out)
    losses = [train(args, actor, train_rows, dist_info)["train/kl_loss"] for _ in range(8)]
    after = mean_topk_kl(actor.hf_model, held_out)
    assert losses[-1] < losses[0]
    assert after < 0.7 * before, (before, after, losses)


def test_topk_reference_kl_trains_through_the_actor(dist_info, tiny_model_path, tiny_model, teacher, tmp_path):
    """--kl-loss-topk: one reference forward gives the sampled tokens' log-probs and the reference's top-K, and
    the KL the step reports is the top-K KL of the policy to that reference (the perturbed copy serves as the
    reference here, so the KL is not zero at step 0)."""
    teacher.save_pretrained(tmp_path / "reference")
    args = make_args("--use-kl-loss", "--kl-loss-coef", "1.0", "--kl-loss-topk", str(TOPK),
                     "--ref-load", str(tmp_path / "reference"))
    actor = make_actor(args, dist_info, tiny_model_path)
    rows = random_rows(0)
    sampled_only = actor.compute_log_probs(rows, use_ref=True)
    for row, sampled, (log_probs, top_values, top_ids) in zip(
            rows, sampled_only, actor.compute_ref_log_probs_and_topk(rows, TOPK)):
        assert log_probs == pytest.approx(sampled, abs=1e-5)
        expected = torch.log_softmax(response_logits(teacher, row), -1).topk(TOPK, dim=-1)
        assert torch.equal(torch.tensor(top_ids), expected.indices)
        torch.testing.assert_close(torch.tensor(top_values), expected.values, atol=1e-5, rtol=0)
    metrics = train(args, actor, rows, dist_info)
    attach_teacher(teacher, rows)  # the reference's top-K under the names mean_topk_kl reads
    assert metrics["train/kl_loss"] == pytest.approx(mean_topk_kl(tiny_model[0], rows), rel=1e-5)
    assert metrics["train/kl_loss"] > 0 and metrics["train/grad_norm"] > 0
