"""A verifiable task for proving that RL learns: "Repeat this digit: 7" -> "7".

* `make_prompts(n, seed, path)` writes JSONL rows
  `{"prompt": [{"role": "user", "content": "Repeat this digit: 7"}], "label": "7"}` (digits 0-9, seeded);
  CLI: `python -m slime.tasks.digits --out data/digits_train.jsonl --n 2000 --seed 0`.
* `reward(args, sample)`: exact match (`--custom-rm-path slime.tasks.digits.reward`).
* `build_digit_policy()`: a warm start for fast RL tests. The random tiny model (slime.models.tiny)
  produces garbage, so it is fine-tuned on CPU to answer every prompt with ONE digit token followed by
  `<|im_end|>`: in a quarter of the examples the prompt's digit, otherwise a uniformly drawn one. The
  resulting policy has the right output format and is right about a third of the time (0.25 + 0.75/10),
  like a base model that meets a preference only sometimes: GRPO groups get reward variance from the
  start, and RL has a behaviour to reinforce (copying the prompt's digit) rather than one to discover
  from scratch, which a 2-layer model cannot do in a few CPU minutes. In the tiny tokenizer every digit 0-9 is a
  single token (checked at build time), so an answer is exactly two tokens: digit, end-of-turn.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import shutil
import time
from pathlib import Path
from typing import Any

DIGITS = [str(d) for d in range(10)]
PROMPT_TEMPLATE = "Repeat this digit: {digit}"
EOS = "<|im_end|>"
# End-of-turn texts that may trail a response when special tokens are not skipped.
_END_OF_TURN = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>", "</s>")

# Bump "version" when anything below changes the trained weights.
_RECIPE = {
    "version": 2,
    "copy_rate": 0.25,
    "steps": 200,
    "batch_size": 64,
    "lr": 5e-3,
    "weight_decay": 0.0,
    "seed": 0,
    "eval_prompts": 200,
    "eval_seed": 1234,
}
ACCURACY_RANGE = (0.15, 0.45)  # base accuracy: at most 0.25 + 0.75 / 10, well below what RL reaches
MIN_FORMAT_RATE = 0.95  # share of sampled answers that are exactly <digit><|im_end|>


# --------------------------------------------------------------------------------------------------
# prompts and reward
# --------------------------------------------------------------------------------------------------


def prompt_messages(digit: int | str) -> list[dict]:
    return [{"role": "user", "content": PROMPT_TEMPLATE.format(digit=digit)}]


def make_prompts(n: int, seed: int, path: str | Path) -> Path:
    """Write `n` prompt rows with uniformly drawn digits (seeded) to a JSONL file; return its path."""
    rng = random.Random(seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for _ in range(n):
            digit = rng.choice(DIGITS)
            f.write(json.dumps({"prompt": prompt_messages(digit), "label": digit}) + "\n")
    tmp.replace(path)
    return path


def normalize_answer(text: str | None) -> str:
    """The response text stripped, with one trailing end-of-turn token text removed."""
    text = (text or "").strip()
    for marker in _END_OF_TURN:
        if text.endswith(marker):
            text = text[: -len(marker)].strip()
            break
    return text


def score(response: str | None, label: Any) -> float:
    """1.0 if the normalised response equals the label exactly, else 0.0."""
    if label is None:
        return 0.0
    return 1.0 if normalize_answer(response) == str(label).strip() else 0.0


async def reward(args, sample, **kwargs) -> float | list[float]:
    """`--custom-rm-path slime.tasks.digits.reward`: exact match of the response with the label.

    Also accepts a list of samples (batched / group RM) and then returns one reward per sample.
    """
    if isinstance(sample, list):
        return [score(s.response, s.label) for s in sample]
    return score(sample.response, sample.label)


# --------------------------------------------------------------------------------------------------
# the warm-start policy
# --------------------------------------------------------------------------------------------------


def _recipe_key(base: Path) -> str:
    blob = json.dumps(
        {"recipe": _RECIPE, "base": base.name, "template": PROMPT_TEMPLATE, "digits": DIGITS, "eos": EOS},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def build_digit_policy(base: str | Path | None = None, out_dir: str | Path | None = None) -> Path:
    """Return a folder with the digit warm-start policy (model + tokenizer), training it if not cached.

    `base` defaults to `slime.models.tiny.build_tiny_model()`. Cached under
    `cache_dir()/tiny/digit-policy-<recipe key>` and built atomically (concurrent builders are safe).
    """
    from slime.models.tiny import build_tiny_model
    from slime.utils.paths import atomic_directory, cache_dir

    base = Path(base) if base is not None else build_tiny_model()
    final = Path(out_dir) if out_dir else cache_dir() / "tiny" / f"digit-policy-{_recipe_key(base)}"
    if (final / "config.json").exists():
        return final
    with atomic_directory(final) as tmp:
        _train(base, tmp)
    return final


def digit_token_ids(tokenizer) -> tuple[list[int], int]:
    """The single-token ids of the digits and the end-of-turn id (raises if a digit is not one token)."""
    digit_ids = []
    for digit in DIGITS:
        ids = tokenizer.encode(digit, add_special_tokens=False)
        if len(ids) != 1:
            raise RuntimeError(f"digit {digit!r} is {len(ids)} tokens {ids} in this tokenizer; the digit task "
                               "needs single-token answers")
        digit_ids.append(ids[0])
    eos = tokenizer.convert_tokens_to_ids(EOS)
    if eos is None or eos == tokenizer.unk_token_id:
        raise RuntimeError(f"{EOS!r} is not a token of this tokenizer")
    return digit_ids, eos


def _prompt_ids(tokenizer) -> list[list[int]]:
    """Prompt ids per digit, rendered exactly as the rollout renders them (chat template, generation prompt)."""
    rows = []
    for digit in DIGITS:
        text = tokenizer.apply_chat_template(prompt_messages(digit), tokenize=False, add_generation_prompt=True)
        rows.append(tokenizer.encode(text, add_special_tokens=False))
    if len({len(r) for r in rows}) != 1:
        raise RuntimeError("digit prompts render to different lengths; expected single-token digits")
    return rows


def _train(base: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.monotonic()
    torch.manual_seed(_RECIPE["seed"])
    generator = torch.Generator().manual_seed(_RECIPE["seed"])
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    model.train()

    digit_ids, eos = digit_token_ids(tokenizer)
    prompts = torch.tensor(_prompt_ids(tokenizer))  # [10, P]
    # The chat template renders an assistant answer as "<prompt><digit><|im_end|>...": train exactly those.
    full = tokenizer.apply_chat_template(
        prompt_messages(3) + [{"role": "assistant", "content": "5"}], tokenize=False)
    expected = tokenizer.decode(prompts[3].tolist() + [digit_ids[5], eos])
    if not full.startswith(expected):
        raise RuntimeError(f"chat template renders the answer as {full!r}, expected a prefix {expected!r}")

    digit_ids_t = torch.tensor(digit_ids)
    B = _RECIPE["batch_size"]
    steps = _RECIPE["steps"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=_RECIPE["lr"], weight_decay=_RECIPE["weight_decay"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
    for step in range(steps):
        # copy the prompt's digit with probability copy_rate, else answer a uniformly drawn digit
        asked = torch.randint(0, 10, (B,), generator=generator)
        copy = torch.rand((B,), generator=generator) < _RECIPE["copy_rate"]
        answered = torch.where(copy, asked, torch.randint(0, 10, (B,), generator=generator))
        targets = torch.stack([digit_ids_t[answered], torch.full((B,), eos)], dim=1)  # [B, 2]
        # the logits at positions P-1 and P (the last two of prompt + digit) predict the digit and the
        # end-of-turn token; only those two are computed
        input_ids = torch.cat([prompts[asked], targets[:, :1]], dim=1)
        logits = model(input_ids=input_ids, logits_to_keep=2).logits.float()
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()

    model.eval()
    report = evaluate_policy(model, tokenizer)
    seconds = round(time.monotonic() - started, 1)
    print(f"digit policy: sampled accuracy {report['sampled_accuracy']:.3f}, expected accuracy "
          f"{report['expected_accuracy']:.3f}, format {report['format_rate']:.3f} on {report['n']} prompts "
          f"at T=1; greedy answers {report['greedy_answers']}; trained in {seconds} s", flush=True)
    low, high = ACCURACY_RANGE
    for name in ("sampled_accuracy", "expected_accuracy"):
        if not low <= report[name] <= high:
            raise RuntimeError(f"digit policy {name} {report[name]:.3f} outside [{low}, {high}]")
    if report["format_rate"] < MIN_FORMAT_RATE or not all(a in DIGITS for a in report["greedy_answers"]):
        raise RuntimeError(f"digit policy does not answer with a single digit: {report}")

    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"):
        if (base / name).exists():
            shutil.copy2(base / name, out / name)
    model.save_pretrained(out)
    (out / "digit_policy_recipe.json").write_text(json.dumps(
        {**_RECIPE, "final_loss": round(loss.item(), 4), "seconds": seconds, "base": str(base), **report},
        indent=2))


def evaluate_policy(model, tokenizer, n: int | None = None, seed: int | None = None) -> dict:
    """Sample answers at temperature 1 to `n` seeded prompts (full forward passes, no engine).

    Returns the sampled accuracy, the expected accuracy (mean probability of the right digit), the
    share of answers that are exactly `<digit><|im_end|>`, and the greedy answer to each digit prompt.
    """
    import torch

    n = n or _RECIPE["eval_prompts"]
    seed = _RECIPE["eval_seed"] if seed is None else seed
    generator = torch.Generator().manual_seed(seed)
    digit_ids, eos = digit_token_ids(tokenizer)
    prompts = torch.tensor(_prompt_ids(tokenizer))
    asked = torch.randint(0, 10, (n,), generator=generator)
    with torch.no_grad():
        ids = prompts[asked]
        first = torch.softmax(model(input_ids=ids).logits[:, -1].float(), dim=-1)
        expected = first[torch.arange(n), torch.tensor(digit_ids)[asked]].mean().item()
        tok1 = torch.multinomial(first, 1, generator=generator)
        ids = torch.cat([ids, tok1], dim=1)
        second = torch.softmax(model(input_ids=ids).logits[:, -1].float(), dim=-1)
        tok2 = torch.multinomial(second, 1, generator=generator)
        greedy_first = model(input_ids=prompts).logits[:, -1].argmax(-1)
        greedy_second = model(input_ids=torch.cat([prompts, greedy_first[:, None]], 1)).logits[:, -1].argmax(-1)
    well_formed = [(int(a) in digit_ids and int(b) == eos) for a, b in zip(tok1[:, 0], tok2[:, 0])]
    correct = [int(a) == digit_ids[int(d)] and ok for a, d, ok in zip(tok1[:, 0], asked, well_formed)]
    greedy = [tokenizer.decode([int(a)]) if int(b) == eos else tokenizer.decode([int(a), int(b)])
              for a, b in zip(greedy_first, greedy_second)]
    return {
        "n": n,
        "sampled_accuracy": sum(correct) / n,
        "expected_accuracy": expected,
        "format_rate": sum(well_formed) / n,
        "greedy_answers": greedy,
    }


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------


def reward_curve(metrics_path: str | Path) -> list[float]:
    """The mean reward of each rollout from a run's metrics.jsonl (the rollout-level metrics are merged into the
    last optimizer step of each rollout, so one row per rollout carries `rollout/raw_reward`)."""
    rows = [json.loads(line) for line in Path(metrics_path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [float(row["rollout/raw_reward"]) for row in rows if "rollout/raw_reward" in row]


def learning_gain(curve: list[float], window: int = 3) -> float:
    """Mean of the last `window` rollouts minus the mean of the first `window` (fewer when the curve is shorter)."""
    if not curve:
        raise ValueError("an empty reward curve")
    k = min(window, len(curve))
    return sum(curve[-k:]) / k - sum(curve[:k]) / k


def print_curve(metrics_path: str | Path, min_gain: float) -> bool:
    """Print a run's reward curve and whether it rose by `min_gain` (the scripts' proof of learning)."""
    curve = reward_curve(metrics_path)
    if not curve:
        print(f"no rollout/raw_reward in {metrics_path}")
        return False
    print(f"\nreward curve ({metrics_path}): mean exact-match reward per rollout")
    for i, value in enumerate(curve, 1):
        print(f"rollout {i:2d}: {value:.2f}  {'#' * round(value * 40)}")
    k = min(3, len(curve))
    gain = learning_gain(curve)
    print(f"mean reward, first {k} rollouts {sum(curve[:k]) / k:.2f} -> last {k} rollouts "
          f"{sum(curve[-k:]) / k:.2f} ({gain:+.2f})")
    if gain < min_gain:
        print(f"the reward did not rise by {min_gain}: no clear learning")
        return False
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Digit-repeat task: write prompt files, build the warm-start policy, "
                                                 "check a run's reward curve.")
    parser.add_argument("--out", type=Path, help="JSONL file to write prompts to")
    parser.add_argument("--n", type=int, default=2000, help="number of prompts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--build-policy", action="store_true",
                        help="build (or find in the cache) the warm-start digit policy and print its folder")
    parser.add_argument("--curve", type=Path, metavar="METRICS_JSONL",
                        help="print a run's reward curve; exit 1 unless it rose by --min-gain")
    parser.add_argument("--min-gain", type=float, default=0.3,
                        help="--curve: the rise (mean of the last 3 rollouts - the first 3) that counts as learning")
    args = parser.parse_args(argv)
    if args.out is None and not args.build_policy and args.curve is None:
        parser.error("give --out, --build-policy and/or --curve")
    if args.out is not None:
        print(make_prompts(args.n, args.seed, args.out))
    if args.build_policy:
        print(build_digit_policy())
    if args.curve is not None and not print_curve(args.curve, args.min_gain):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
