"""A few On-Policy Distillation steps lower the student's KL to the hinted teacher on held-out prompts.

The OPD recipe end to end on the tiny random Qwen3, on CPU: the student sees a plain chat prompt; the
teacher is the FROZEN original model, shown the same prompt with a hindsight hint appended to the user's
message (`hinted_messages`, rendered by `TeacherPromptBuilder` exactly as the engine renders the student's
prompt). Each round the current student samples short responses to the train prompts, the teacher scores
exactly those response ids under its hinted prompt (a direct forward pass here; the engine path is
covered by test_teacher_scoring), and `slime.training.loop.train_on_rollout` takes one PPO step with
`--advantage-estimator on_policy_distillation` (A_t = teacher_logp_t - old_logp_t, clip 0.2).

What OPD minimises is the reverse KL(student(. | prompt, y<t) || teacher(. | prompt + hint, y<t)); the
test measures it exactly (full vocabulary, float64) on prompts it never trained on, along fixed response
prefixes, before and after. The hint is constant, so "behave as if the hint were there" is something
that carries to new prompts. A control run whose teacher log-probs are the student's own (advantage 0)
must leave the weights, and so the KL, unchanged: the decrease comes from the teacher signal.
"""

from __future__ import annotations

import time

import pytest
import torch

from slime.conversation.teacher import HINT_MARKER, TeacherPromptBuilder, hinted_messages
from slime.utils.ppo_utils import log_probs_from_logits, on_policy_distillation_advantages

HINT = "Answer only with the word yes."
TRAIN_PROMPTS = [
    "What is the capital of France?",
    "Should I open the file now?",
    "Can you read the configuration for me?",
    "Is it going to rain tomorrow?",
    "Please summarize the last message.",
    "Do you know how to sort a list in Python?",
    "Which branch should I merge first?",
    "Will the build finish before noon?",
]
HELD_OUT_PROMPTS = [
    "Is the test suite passing?",
    "Tell me about the weather in Berlin.",
    "Could you restart the server?",
    "What time is the meeting?",
    "Have you seen my keys anywhere?",
    "Does this function return a string?",
]
SAMPLES_PER_PROMPT = 8
RESPONSE_LEN = 6
ROUNDS = 10
TEMPERATURE = 1.0
LR = "1e-3"
# Measured (4 sampling seeds, this configuration): held-out KL falls to 0.55-0.61 x its initial value;
# lr 2e-3 overshoots (0.64-0.72 x), 4 samples per prompt are noisier (0.67-0.78 x after 8 rounds).




pytestmark = pytest.mark.usefixtures("clean_distill_env")


def make_args(lr: str = LR):
    from slime.utils.arguments import parse_args

    return parse_args(["--hf-checkpoint", "tiny", "--rollout-batch-size", str(len(TRAIN_PROMPTS)),
                       "--n-samples-per-prompt", str(SAMPLES_PER_PROMPT), "--num-rollout", str(ROUNDS),
                       "--disable-rollout-global-dataset", "--lr", lr, "--adam-eps", "1e-3",
                       "--use-dynamic-batch-size", "--max-tokens-per-gpu", "512",
                       "--rollout-temperature", str(TEMPERATURE), "--eps-clip", "0.2",
                       "--advantage-estimator", "on_policy_distillation",
                       "--disable-rewards-normalization"], world_size=1)


def make_actor(args, dist_info, tiny_model_path):
    from transformers import AutoTokenizer

    from slime.backends.fsdp.actor import FSDPActor

    return FSDPActor(args, dist_info, tiny_model_path, AutoTokenizer.from_pretrained(tiny_model_path))


# ------------------------------------------------------------------------------------------------ prompts


def prompt_pair(builder: TeacherPromptBuilder, prompt: str) -> tuple[list[int], list[int]]:
    """(student prompt ids, teacher prompt ids): the chat rendering without and with the hint."""
    messages = [{"role": "user", "content": prompt}]
    return builder.render_prompt_ids(messages), builder.render_prompt_ids(hinted_messages(messages, HINT))


# ------------------------------------------------------------------------------------------------ sampling


@torch.no_grad()
def next_token_log_probs(model, input_ids: torch.Tensor) -> torch.Tensor:
    """`[b, V]` float64 log-probs of the next token after each row of `input_ids` `[b, L]`, at TEMPERATURE."""
    logits = model(input_ids=input_ids).logits[:, -1].double()
    return torch.log_softmax(logits / TEMPERATURE, dim=-1)


@torch.no_grad()
def sample_responses(model, prompt_ids: list[int], n: int, generator: torch.Generator, eos_id: int):
    """`n` responses of at most RESPONSE_LEN tokens (cut after EOS) and their sampling log-probs."""
    ids = torch.tensor([prompt_ids] * n)
    tokens, log_probs = [], []
    for _ in range(RESPONSE_LEN):
        lp = next_token_log_probs(model, ids)
        nxt = torch.multinomial(lp.exp(), 1, generator=generator)
        tokens.append(nxt[:, 0])
        log_probs.append(lp.gather(-1, nxt)[:, 0])
        ids = torch.cat([ids, nxt], dim=1)
    tokens, log_probs = torch.stack(tokens, 1).tolist(), torch.stack(log_probs, 1).tolist()
    out = []
    for toks, lps in zip(tokens, log_probs):
        length = toks.index(eos_id) + 1 if eos_id in toks else len(toks)
        out.append((toks[:length], lps[:length]))
    return out


@torch.no_grad()
def teacher_log_probs(teacher, teacher_prompt_ids: list[int], response_ids: list[int]) -> list[float]:
    """The frozen teacher's log-prob of every response token after the hinted prompt (one per token)."""
    ids = torch.tensor([teacher_prompt_ids + response_ids])
    logits = teacher(input_ids=ids).logits[0, len(teacher_prompt_ids) - 1 : -1].double()
    return log_probs_from_logits(logits, torch.tensor(response_ids), TEMPERATURE).tolist()


def build_rows(student, teacher, builder, generator, eos_id) -> list[dict]:
    rows = []
    for g, prompt in enumerate(TRAIN_PROMPTS):
        student_ids, teacher_ids = prompt_pair(builder, prompt)
        for response, rollout_lp in sample_responses(student, student_ids, SAMPLES_PER_PROMPT, generator, eos_id):
            rows.append({"tokens": student_ids + response, "response_length": len(response),
                         "loss_mask": [1] * len(response), "reward": 0.0, "rollout_log_probs": rollout_lp,
                         "teacher_log_probs": teacher_log_probs(teacher, teacher_ids, response),
                         "group_index": g, "index": len(rows)})
    return rows


# ------------------------------------------------------------------------------------------------ the metric


@torch.no_grad()
def held_out_kl(student, teacher, probes) -> float:
    """Mean exact KL(student || teacher) over every position of every probe, float64, full vocabulary.

    A probe is (student prompt ids, teacher prompt ids, response prefix): positions 0..len(prefix)-1
    condition on the prompt plus the first t prefix tokens, as the student's own rollouts would.
    """
    total, count = 0.0, 0
    for student_ids, teacher_ids, response in probes:
        s = torch.log_softmax(student(input_ids=torch.tensor([student_ids + response])).logits[0].double()
                              / TEMPERATURE, -1)[len(student_ids) - 1 : -1]
        t = torch.log_softmax(teacher(input_ids=torch.tensor([teacher_ids + response])).logits[0].double()
                              / TEMPERATURE, -1)[len(teacher_ids) - 1 : -1]
        kl = (s.exp() * (s - t)).sum(-1)
        total += float(kl.sum())
        count += kl.numel()
    return total / count


def held_out_probes(student, builder, eos_id) -> list[tuple[list[int], list[int], list[int]]]:
    """Fixed response prefixes for the held-out prompts, sampled once from the initial student (seeded)
    plus the greedy one, so before and after are measured at the same positions."""
    generator = torch.Generator().manual_seed(1234)
    probes = []
    for prompt in HELD_OUT_PROMPTS:
        student_ids, teacher_ids = prompt_pair(builder, prompt)
        for response, _ in sample_responses(student, student_ids, 3, generator, eos_id):
            probes.append((student_ids, teacher_ids, response))
        greedy, ids = [], list(student_ids)
        for _ in range(RESPONSE_LEN):
            greedy.append(int(next_token_log_probs(student, torch.tensor([ids + greedy]))[0].argmax()))
        probes.append((student_ids, teacher_ids, greedy))
    return probes


def trainable_state(actor) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in actor.model.named_parameters() if v.requires_grad}


def run_rounds(args, actor, teacher, builder, dist_info, control: bool = False) -> list[dict]:
    """ROUNDS of: sample from the current student, score with the teacher, one train_on_rollout."""
    from slime.training.loop import train_on_rollout

    eos_id = actor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    generator = torch.Generator().manual_seed(0)
    history = []
    for _ in range(ROUNDS):
        student = actor.hf_model.eval()  # no dropout in the tiny Qwen3; eval only for the sampling passes
        rows = build_rows(student, teacher, builder, generator, eos_id)
        actor.hf_model.train()
        if control:  # the student as its own teacher: teacher - old is exactly 0
            for row, lp in zip(rows, actor.compute_log_probs(rows)):
                row["teacher_log_probs"] = lp
        (metrics,) = train_on_rollout(args, actor, rows, dist_info)
        adv = [a for row in rows for a in row["advantages"]]
        metrics["adv_abs_mean"] = sum(abs(a) for a in adv) / len(adv)
        history.append(metrics)
    return history


# ------------------------------------------------------------------------------------------------ tests


def test_teacher_prompt_is_the_student_prompt_plus_the_hint(tiny_model):
    _, tokenizer = tiny_model
    builder = TeacherPromptBuilder(tokenizer)
    student_ids, teacher_ids = prompt_pair(builder, TRAIN_PROMPTS[0])
    assert student_ids != teacher_ids
    assert HINT_MARKER + HINT in tokenizer.decode(teacher_ids)
    assert tokenizer.decode(teacher_ids) == tokenizer.decode(student_ids).replace(
        TRAIN_PROMPTS[0], TRAIN_PROMPTS[0] + HINT_MARKER + HINT)
    # the rows' advantage is what on_policy_distillation_advantages gives for the teacher and old log-probs
    teacher = torch.tensor([[-1.0, -2.0]])
    old = torch.tensor([[-1.5, -1.0]])
    assert on_policy_distillation_advantages(teacher, old, torch.ones(1, 2)).tolist() == [[0.5, -1.0]]


def test_opd_steps_lower_the_held_out_kl_to_the_hinted_teacher(dist_info, tiny_model_path, tiny_model):
    teacher, tokenizer = tiny_model  # the frozen original model; never trained here
    builder = TeacherPromptBuilder(tokenizer)
    frozen = {k: v.detach().clone() for k, v in teacher.state_dict().items()}

    started = time.perf_counter()
    args = make_args()
    actor = make_actor(args, dist_info, tiny_model_path)
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    probes = held_out_probes(actor.hf_model.eval(), builder, eos_id)
    before = held_out_kl(actor.hf_model, teacher, probes)
    history = run_rounds(args, actor, teacher, builder, dist_info)
    after = held_out_kl(actor.hf_model.eval(), teacher, probes)
    elapsed = time.perf_counter() - started
    print(f"\nOPD held-out KL(student || hinted teacher): before {before:.6g}  after {after:.6g}  "
          f"({after / before:.3f} x) in {elapsed:.1f} s")
    for i, m in enumerate(history):
        print(f"  round {i}: pg_loss {m['train/pg_loss']:+.3e}  ppo_kl {m['train/ppo_kl']:+.2e}  "
              f"clipfrac {m['train/pg_clipfrac']:.3f}  |A| {m['adv_abs_mean']:.4f}  grad_norm {m['train/grad_norm']:.3e}")

    assert all(torch.equal(frozen[k], v) for k, v in teacher.state_dict().items())  # the teacher stayed frozen
    assert after < 0.75 * before, (before, after)


def test_opd_without_a_teacher_signal_changes_nothing(dist_info, tiny_model_path, tiny_model):
    """Control: teacher log-probs = the student's own old log-probs, so every advantage is 0."""
    teacher, tokenizer = tiny_model
    builder = TeacherPromptBuilder(tokenizer)
    args = make_args()
    actor = make_actor(args, dist_info, tiny_model_path)
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    probes = held_out_probes(actor.hf_model.eval(), builder, eos_id)
    before_kl, before_state = held_out_kl(actor.hf_model, teacher, probes), trainable_state(actor)
    history = run_rounds(args, actor, teacher, builder, dist_info, control=True)
    after_kl, after_state = held_out_kl(actor.hf_model.eval(), teacher, probes), trainable_state(actor)
    print(f"\ncontrol held-out KL: before {before_kl:.6g}  after {after_kl:.6g}")
    assert all(m["adv_abs_mean"] == 0 for m in history)
    assert all(torch.equal(before_state[k], after_state[k]) for k in before_state)
    assert after_kl == before_kl
