"""slime's default rollout function (`--rollout-function-path slime.rollout.default_rollout.generate_rollout`).

Train rollouts (`generate_rollout(args, rollout_id, data_source)`):
  1. pull `--over-sampling-batch-size` prompt groups from the data source while the accepted plus the
     in-flight groups are fewer than `--rollout-batch-size`;
  2. run every sample of a group through the custom generate function (`--custom-generate-function-path`,
     or the sample's own `generate_function_path`) or the default single-turn token-in/token-out `generate`,
     concurrently under one semaphore, round-robin over the engines;
  3. score samples whose reward is None with `--custom-rm-path` (per sample, or once per group with
     `args.group_rm`);
  4. keep or drop each finished group with `--dynamic-sampling-filter-path` (bool or DynamicFilterOutput);
  5. once enough groups are accepted, cancel the rest (with `args.partial_rollout` unfinished groups go
     back to the data source buffer and are resumed next time), sort by group index, run
     `--rollout-sample-filter-path` / `--rollout-all-samples-process-path`, and return
     `RolloutFnTrainOutput(groups, metrics)`.
Eval rollouts (`evaluation=True`) generate once per `--eval-prompt-data` prompt (times
`--n-samples-per-eval-prompt`) with the eval sampling settings and no filter.

Where the engines are: `args.engine_urls` (set by the trainer), else `--rollout-external-engine-addrs`,
else `args.sglang_router_ip/port`. In flight: `--sglang-server-concurrency` per engine, engines behind a router
included (`args.num_engine_workers`, set by the trainer). Hooks come from `args.hooks` (loaded callables, keyed by the attribute
name `custom_rm_path` or the flag `--custom-rm-path`), else the dotted path on `args` is imported.

`generate_rollout` is a plain function: it runs `generate_rollout_async` in its own event loop (in a
helper thread when the calling thread already runs one) and closes that loop's engine clients after.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import itertools
import logging
import math
import statistics
import time
import weakref
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from slime.engine.client import AsyncEngineClient, engine_dialect
from slime.rollout.data_source import load_prompt_samples, load_tokenizer, render_prompt
from slime.utils.types import (DynamicFilterOutput, RolloutFnEvalOutput, RolloutFnTrainOutput, Sample,
                               flatten_samples)

__all__ = [
    "RolloutState",
    "close_engine_clients",
    "connections_per_url",
    "engine_count",
    "engine_urls",
    "eval_rollout_async",
    "generate",
    "generate_and_rm",
    "generate_and_rm_group",
    "generate_rollout",
    "generate_rollout_async",
    "get_engine_client",
    "get_hook",
    "run_coroutine",
    "sampling_params_from_args",
    "total_concurrency",
]

log = logging.getLogger(__name__)

# Requests in flight per engine (--sglang-server-concurrency). Upstream's 512 suits GPU engines; the
# embedded engine decodes 32 at a time, and a larger pool only makes the HTTP client's connection
# bookkeeping (quadratic in open connections) dominate small rollouts.
DEFAULT_CONCURRENCY = 64
DEFAULT_REQUEST_TIMEOUT = 600.0
DONE_STATUSES = (Sample.Status.COMPLETED, Sample.Status.TRUNCATED)


# --------------------------------------------------------------------------------------------------
# hooks, engines, sampling parameters
# --------------------------------------------------------------------------------------------------

_loaded_paths: dict[tuple[str, str], Any] = {}


def _load_dotted(path: str, flag: str) -> Any:
    key = (flag, path)
    if key not in _loaded_paths:
        from slime.utils.hooks import load_function

        _loaded_paths[key] = load_function(path, flag)
    return _loaded_paths[key]


def get_hook(args, name: str) -> Any:
    """The hook for attribute `name` (e.g. "custom_rm_path"): from `args.hooks`, else imported from the
    dotted path `getattr(args, name)`; None when not configured."""
    flag = "--" + name.replace("_", "-")
    hooks = getattr(args, "hooks", None) or {}
    for key in (name, flag):
        if hooks.get(key) is not None:
            return hooks[key]
    path = getattr(args, name, None)
    if isinstance(path, str) and path:
        return _load_dotted(path, flag)
    return path if callable(path) else None


def engine_urls(args) -> list[str]:
    urls = getattr(args, "engine_urls", None) or getattr(args, "rollout_external_engine_addrs", None)
    if not urls and getattr(args, "sglang_router_ip", None):
        urls = [f"http://{args.sglang_router_ip}:{args.sglang_router_port}"]
    if not urls:
        raise ValueError("no inference engine to generate with: the trainer sets args.engine_urls "
                         "(or pass --rollout-external-engine-addrs)")
    return [str(u).rstrip("/") for u in ([urls] if isinstance(urls, str) else urls)]


# One client per (event loop, engine URL): an httpx.AsyncClient's pool belongs to the loop it was made in.
_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_round_robin = itertools.count()


def _concurrency(args) -> int:
    return int(getattr(args, "sglang_server_concurrency", None) or DEFAULT_CONCURRENCY)


def engine_count(args) -> int:
    """Engines serving generation. A router is one URL but N engines: the trainer sets `args.num_engine_workers`;
    for an upstream-style router address (`sglang_router_ip`) the layout's engine count is used; else one per URL."""
    count = getattr(args, "num_engine_workers", None)
    if count:
        return int(count)
    urls = getattr(args, "engine_urls", None) or getattr(args, "rollout_external_engine_addrs", None)
    if not urls and getattr(args, "sglang_router_ip", None) and getattr(args, "rollout_num_gpus", None):
        return max(1, args.rollout_num_gpus // (getattr(args, "rollout_num_gpus_per_engine", None) or 1))
    return len(engine_urls(args))


def total_concurrency(args) -> int:
    """Requests in flight in one rollout: --sglang-server-concurrency per engine, over every engine."""
    return _concurrency(args) * engine_count(args)


def connections_per_url(args) -> int:
    """HTTP connections each engine URL's client may open: round-robin spreads requests evenly over the URLs,
    and a router URL carries all its engines' share."""
    return math.ceil(total_concurrency(args) / len(engine_urls(args)))


def get_engine_client(args, url: str | None = None) -> AsyncEngineClient:
    """The running loop's client for `url`, or for the next engine in round-robin order.

    Custom generate functions can use it: `client = get_engine_client(args)`.
    """
    if url is None:
        urls = engine_urls(args)
        url = urls[next(_round_robin) % len(urls)]
    loop = asyncio.get_running_loop()
    per_loop = _clients.setdefault(loop, {})
    client = per_loop.get(url)
    if client is None:
        client = AsyncEngineClient(
            url,
            api_key=getattr(args, "engine_api_key", None),
            timeout=getattr(args, "rollout_request_timeout", None) or DEFAULT_REQUEST_TIMEOUT,
            max_connections=connections_per_url(args),
            dialect=engine_dialect(getattr(args, "rollout_engine", "embedded")),
        )
        per_loop[url] = client
    return client


async def close_engine_clients() -> None:
    """Close the running loop's engine clients (the sync `generate_rollout` does this itself), the upstream-style
    `slime.utils.http_utils` pool included."""
    from slime.utils.http_utils import close_clients

    per_loop = _clients.pop(asyncio.get_running_loop(), {})
    for client in per_loop.values():
        await client.aclose()
    await close_clients()


def sampling_params_from_args(args, evaluation: bool = False) -> dict:
    """SGLang sampling params of framework-issued generations (None-valued settings are left out)."""
    def pick(eval_name: str, train_name: str, default=None):
        value = getattr(args, eval_name, None) if evaluation else None
        return value if value is not None else getattr(args, train_name, default)

    params = {
        "temperature": pick("eval_temperature", "rollout_temperature", 1.0),
        "top_p": pick("eval_top_p", "rollout_top_p", 1.0),
        "top_k": pick("eval_top_k", "rollout_top_k", -1),
        "max_new_tokens": pick("eval_max_response_len", "rollout_max_response_len"),
        "stop": getattr(args, "rollout_stop", None),
        "stop_token_ids": getattr(args, "rollout_stop_token_ids", None),
        # Response text without special tokens; the token ids (what is trained on) keep everything.
        "skip_special_tokens": getattr(args, "rollout_skip_special_tokens", True),
        "no_stop_trim": True,
        "spaces_between_special_tokens": False,
    }
    params = {k: v for k, v in params.items() if v is not None}
    if "stop" in params:
        params["stop"] = list(params["stop"])
    if "stop_token_ids" in params:
        params["stop_token_ids"] = [int(t) for t in params["stop_token_ids"]]
    return params


# --------------------------------------------------------------------------------------------------
# one sample
# --------------------------------------------------------------------------------------------------


def _prompt_ids(args, sample: Sample) -> list[int]:
    tokenizer = load_tokenizer(args.hf_checkpoint)
    prompt = sample.prompt
    if not isinstance(prompt, str):  # raw messages (no --apply-chat-template): template at request time
        prompt = render_prompt(tokenizer, prompt, chat_template_kwargs=getattr(args, "apply_chat_template_kwargs", None))
    return tokenizer.encode(prompt, add_special_tokens=False)


async def generate(args, sample: Sample, sampling_params: dict, client: AsyncEngineClient | None = None) -> Sample:
    """Default single-turn, token-in/token-out generation; fills the sample in place and returns it.

    The prompt ids are `sample.tokens` when already set (a partially generated sample is resumed: its
    earlier response tokens stay, `max_new_tokens` shrinks accordingly), else the tokenised prompt.
    """
    input_ids = list(sample.tokens) if sample.tokens else _prompt_ids(args, sample)
    previous = sample.response_length
    params = dict(sampling_params)
    if previous and params.get("max_new_tokens") is not None:
        params["max_new_tokens"] -= previous
        if params["max_new_tokens"] <= 0:
            sample.status = Sample.Status.TRUNCATED
            return sample
    if "seed" not in params and sample.index is not None:
        # a seed per sample makes rollouts reproducible: the engine's shared generator would hand out
        # random numbers in whatever order requests happen to be batched
        base = getattr(args, "rollout_seed", None) or getattr(args, "seed", 0)
        params["seed"] = (base * 1_000_003 + sample.index * 7_919 + previous) % 2**62
    client = client or get_engine_client(args)
    output = await client.generate(input_ids=input_ids, sampling_params=params, return_logprob=True)
    meta = output["meta_info"]
    entries = meta.get("output_token_logprobs") or []
    new_ids = [int(entry[1]) for entry in entries]
    logprobs = [float(entry[0]) for entry in entries]
    if "output_ids" in output and list(output["output_ids"]) != new_ids:
        raise RuntimeError(f"engine output_ids and output_token_logprobs disagree "
                           f"({len(output['output_ids'])} vs {len(new_ids)} tokens)")

    old_mask = sample.loss_mask if sample.loss_mask is not None else [1] * previous
    if previous and getattr(args, "mask_offpolicy_in_partial_rollout", False):
        old_mask = [0] * previous
    # a continued response whose earlier, trained part has no behaviour log-probs has none as a whole: a 0.0 filler
    # would pass for a probability of 1 under TIS (the trainer recomputes old log-probs; --use-tis refuses the
    # sample). Fillers on tokens that are not trained are never read.
    earlier = sample.rollout_log_probs
    if earlier is None and not any(old_mask):
        earlier = [0.0] * previous
    sample.tokens = input_ids + new_ids
    sample.response = (sample.response or "") + output.get("text", "")
    sample.response_length = previous + len(new_ids)
    sample.rollout_log_probs = None if earlier is None else list(earlier) + logprobs
    sample.loss_mask = list(old_mask) + [1] * len(new_ids)
    sample.update_from_meta_info(meta)
    return sample


async def _call_rm(args, rm, target):
    result = rm(args, target)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _score(args, item: Sample | list[Sample]) -> None:
    """Reward every unscored, non-aborted sample of `item` (a sample, or a list from a custom generate)."""
    samples = item if isinstance(item, list) else [item]
    todo = [s for s in samples if s.reward is None and s.status != Sample.Status.ABORTED]
    if not todo:
        return
    rm = get_hook(args, "custom_rm_path")
    if rm is None:
        raise ValueError(f"sample {todo[0].index} has no reward and no --custom-rm-path is configured")
    if isinstance(item, list):
        rewards = await _call_rm(args, rm, todo)
        if not isinstance(rewards, list) or len(rewards) != len(todo):
            raise ValueError(f"--custom-rm-path returned {type(rewards).__name__} for a batch of {len(todo)} "
                             "samples; a batched call must return a list aligned with its input")
        for sample, value in zip(todo, rewards):
            sample.reward = value
    else:
        item.reward = await _call_rm(args, rm, item)


class RolloutState:
    """Per-call state shared by the tasks of one rollout: the bound on requests in flight
    (`total_concurrency`) and whether the rollout was aborted. Pass one to `generate_and_rm` /
    `generate_and_rm_group` calls that belong to the same rollout."""

    def __init__(self, args):
        self.semaphore = asyncio.Semaphore(total_concurrency(args))
        self.aborted = False


def _generate_fn(args, sample: Sample):
    if sample.generate_function_path:
        return _load_dotted(sample.generate_function_path, "--custom-generate-function-path")
    return get_hook(args, "custom_generate_function_path")


async def generate_and_rm(args, sample: Sample, sampling_params: dict, evaluation: bool = False,
                          state: RolloutState | None = None) -> Sample | list[Sample]:
    """Generate one sample (unless already done) and score it (unless `args.group_rm`)."""
    if sample.status not in DONE_STATUSES:
        state = state or RolloutState(args)
        async with state.semaphore:
            if state.aborted:
                return sample
            fn = _generate_fn(args, sample)
            if fn is None:
                result = await generate(args, sample, sampling_params)
            else:
                from slime.utils.hooks import accepts_keyword

                kwargs = {"evaluation": evaluation} if accepts_keyword(fn, "evaluation") else {}
                result = await fn(args, sample, sampling_params, **kwargs)
    else:
        result = sample
    if not getattr(args, "group_rm", False):
        await _score(args, result)
    return result


def _trajectories(groups) -> list[Sample]:
    """One sample per trajectory of generated groups: a multi-step generator (dynamic history) returns its steps as a
    list, all with the trajectory's reward, and counting steps would weigh long trajectories more."""
    return [item[-1] if isinstance(item, list) else item for group in groups for item in group
            if not isinstance(item, list) or item]


async def generate_and_rm_group(args, group: list[Sample], sampling_params: dict, evaluation: bool = False,
                                state: RolloutState | None = None) -> list:
    """All samples of one group concurrently; a failure cancels the group's other samples."""
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(generate_and_rm(args, s, copy.deepcopy(sampling_params), evaluation, state))
                 for s in group]
    results = [t.result() for t in tasks]
    if getattr(args, "group_rm", False):
        await _score(args, flatten_samples(results))
    return results


# --------------------------------------------------------------------------------------------------
# the train rollout
# --------------------------------------------------------------------------------------------------


def _filter_decision(fn, args, group) -> tuple[bool, str | None]:
    if fn is None:
        return True, None
    out = fn(args, group)
    if isinstance(out, DynamicFilterOutput) or hasattr(out, "keep"):
        return bool(out.keep), getattr(out, "reason", None)
    if out is None:
        raise TypeError("--dynamic-sampling-filter-path returned None; expected bool or "
                        "DynamicFilterOutput(keep, reason)")
    return bool(out), None


def _group_key(group: list) -> tuple:
    first = flatten_samples(group)[0]
    gi = first.group_index
    return (gi is None, gi if gi is not None else 0, first.index if first.index is not None else 0)


# Groups a rollout lets the engine abort before any is accepted: a weight update aborts at most the groups in flight
# (one batch), an engine that fails every request (a device error, say) aborts them all, forever.
ABORTED_BATCHES_BEFORE_FAILING = 2


def _max_sampled_groups(args, target: int, over: int) -> int:
    explicit = getattr(args, "rollout_max_sampled_groups", None)
    return int(explicit) if explicit else max(16 * target, 4 * over)


async def generate_rollout_async(args, rollout_id: int, data_source, evaluation: bool = False):
    """The async body of `generate_rollout`; usable directly from a caller's own event loop."""
    if evaluation:
        return await eval_rollout_async(args, rollout_id)

    target = int(args.rollout_batch_size)
    over = int(getattr(args, "over_sampling_batch_size", None) or target)
    max_groups = _max_sampled_groups(args, target, over)
    filter_fn = get_hook(args, "dynamic_sampling_filter_path")
    partial = bool(getattr(args, "partial_rollout", False))
    params = sampling_params_from_args(args)
    state = RolloutState(args)

    accepted: list[list] = []
    finished: list[list] = []  # every group that came back, kept or not (for the all-samples hook)
    drops: Counter = Counter()
    pending: dict[asyncio.Task, list] = {}
    last_abort: str | None = None
    submitted = surplus = 0
    started = time.perf_counter()
    try:
        while len(accepted) < target:
            while len(accepted) + len(pending) < target and submitted < max_groups:
                n = min(over, max_groups - submitted)
                for group in data_source.get_samples(n):
                    task = asyncio.create_task(generate_and_rm_group(args, group, params, False, state))
                    pending[task] = group
                submitted += n
            if not pending:
                break
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=lambda t: _group_key(pending[t])):
                group = pending.pop(task)
                results = task.result()  # a generation or reward error ends the rollout
                finished.append(results)
                if len(accepted) >= target:  # finished together with the last needed group
                    if partial:
                        data_source.add_samples([group])
                    surplus += 1
                    continue
                if any(s.status == Sample.Status.ABORTED for s in flatten_samples(results)):
                    if partial:
                        data_source.add_samples([group])
                    drops["aborted"] += 1
                    last_abort = next((s.metadata["abort_reason"] for s in flatten_samples(results)
                                       if s.metadata.get("abort_reason")), last_abort)
                    if not accepted and drops["aborted"] >= ABORTED_BATCHES_BEFORE_FAILING * target:
                        raise RuntimeError(
                            f"the engine aborted all of the first {drops['aborted']} groups of this rollout "
                            f"(last reason: {last_abort or 'none given'}); see the engine's log")
                    continue
                keep, reason = _filter_decision(filter_fn, args, results)
                if keep:
                    accepted.append(results)
                else:
                    drops[reason or "filtered"] += 1
    finally:
        leftover = list(pending.items())
        if leftover:
            state.aborted = True
            for task, _ in leftover:
                task.cancel()
            await asyncio.gather(*(t for t, _ in leftover), return_exceptions=True)
            if partial:
                for _, group in leftover:
                    for sample in group:
                        sample.metadata.setdefault("start_rollout_id", rollout_id)
                data_source.add_samples([g for _, g in leftover])
    elapsed = time.perf_counter() - started

    if len(accepted) < target:
        flag = getattr(args, "dynamic_sampling_filter_path", None) or "(none)"
        detail = (f"{len(accepted)} of the {target} groups needed (--rollout-batch-size) passed "
                  f"--dynamic-sampling-filter-path {flag} after sampling {submitted} groups "
                  f"(cap {max_groups}, args.rollout_max_sampled_groups); drops: {dict(drops)}")
        if not accepted:
            raise RuntimeError(f"dynamic sampling: no group was accepted: {detail}. Relax the filter, raise "
                               "--over-sampling-batch-size, or check the rewards.")
        log.warning("dynamic sampling: returning a short batch: %s", detail)

    accepted.sort(key=_group_key)
    sample_filter = get_hook(args, "rollout_sample_filter_path")
    if sample_filter is not None:
        sample_filter(args, accepted)
    process_all = get_hook(args, "rollout_all_samples_process_path")
    if process_all is not None:
        process_all(args, finished, data_source)

    metrics = _train_metrics(args, accepted, finished, drops, submitted, elapsed)
    metrics["rollout/surplus_groups"] = surplus
    metrics["rollout/unfinished_groups"] = len(leftover)
    return RolloutFnTrainOutput(samples=accepted, metrics=metrics)


def _mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), statistics.pstdev(values)


def _train_metrics(args, accepted, finished, drops: Counter, submitted: int, elapsed: float) -> dict:
    samples = flatten_samples(accepted)
    rewards = [float(s.get_reward_value(args)) for s in samples]
    lengths = [s.effective_response_length for s in samples]
    reward_mean, reward_std = _mean_std(rewards)
    zero_std = sum(1 for g in accepted if len({float(s.get_reward_value(args)) for s in flatten_samples(g)}) <= 1)
    generated = sum(s.response_length for g in finished for s in flatten_samples(g))
    metrics = {
        "rollout/reward_mean": reward_mean,
        "rollout/reward_std": reward_std,
        "rollout/response_len/mean": statistics.fmean(lengths) if lengths else math.nan,
        "rollout/response_len/max": max(lengths, default=0),
        "rollout/response_len/min": min(lengths, default=0),
        "rollout/truncated_ratio": (sum(s.status == Sample.Status.TRUNCATED for s in samples) / len(samples)
                                    if samples else math.nan),
        "rollout/zero_std_groups": zero_std,
        "rollout/groups": len(accepted),
        "rollout/samples": len(samples),
        "rollout/sampled_groups": submitted,
        "rollout/dynamic_filter/dropped": sum(drops.values()),
        "perf/rollout_time": elapsed,
        "perf/rollout_tokens_per_sec": generated / elapsed if elapsed > 0 else math.nan,
    }
    for reason, count in sorted(drops.items()):
        metrics[f"rollout/dynamic_filter/drop_{reason}"] = count
    # the training curve of each reward component (e.g. rollout/reward/acc, rollout/reward/tool_call), per trajectory
    metrics.update(_reward_component_means("rollout/reward", _trajectories(accepted)))
    return metrics


# --------------------------------------------------------------------------------------------------
# the eval rollout
# --------------------------------------------------------------------------------------------------

_eval_cache: dict[tuple, list[Sample]] = {}


def _eval_datasets(args) -> dict[str, str]:
    datasets = getattr(args, "eval_datasets", None)
    if datasets:
        return dict(datasets)
    raw = getattr(args, "eval_prompt_data", None)
    if not raw:
        return {}
    if isinstance(raw, str):
        return {"eval": raw}
    if len(raw) % 2:
        raise ValueError(f"--eval-prompt-data takes NAME PATH pairs, got {raw}")
    return dict(zip(raw[::2], raw[1::2]))


def _eval_prompts(args, path: str) -> list[Sample]:
    apply_template = bool(getattr(args, "apply_chat_template", False))
    key = (path, apply_template, str(getattr(args, "hf_checkpoint", None)))
    if key not in _eval_cache:
        samples, _ = load_prompt_samples(
            path,
            input_key=getattr(args, "eval_input_key", None) or getattr(args, "input_key", None) or "prompt",
            label_key=getattr(args, "eval_label_key", None) or getattr(args, "label_key", None),
            metadata_key=getattr(args, "metadata_key", None),
            tool_key=getattr(args, "tool_key", None),
            tokenizer=load_tokenizer(args.hf_checkpoint) if apply_template else None,
            apply_chat_template=apply_template,
            chat_template_kwargs=getattr(args, "apply_chat_template_kwargs", None),
        )
        _eval_cache[key] = samples
    return _eval_cache[key]


def _reward_component_means(prefix: str, samples: list[Sample]) -> dict[str, float]:
    """`<prefix>/<key>`: the mean of each numeric component of dict rewards (e.g. a tool-call reward's `acc`,
    `tool_call`, `parse_error`), over the samples that have it."""
    values: dict[str, list[float]] = {}
    for sample in samples:
        if isinstance(sample.reward, dict):
            for key, value in sample.reward.items():
                if isinstance(value, (int, float)):  # bools count as 0/1
                    values.setdefault(key, []).append(float(value))
    return {f"{prefix}/{key}": statistics.fmean(v) for key, v in sorted(values.items())}


def _eval_reward(args, sample: Sample) -> float:
    if isinstance(sample.reward, dict):
        key = getattr(args, "eval_reward_key", None) or getattr(args, "reward_key", None)
        return float(sample.reward[key])
    return float(sample.reward)


class EvalProgress:
    """A line at most every `every` seconds (and at the end) while an evaluation runs: prompts' samples done, the rate,
    an ETA. An agentic evaluation runs for tens of minutes on a CPU with no other output."""

    def __init__(self, name: str, total: int, every: float = 60.0):
        self.name, self.total, self.every = name, total, every
        self.count = 0
        self.started = self.last = time.perf_counter()

    def done(self, k: int = 1) -> None:
        self.count += k
        now = time.perf_counter()
        if now - self.last < self.every and self.count < self.total:
            return
        self.last = now
        elapsed = now - self.started
        eta = elapsed / self.count * (self.total - self.count)
        log.info("eval %s: %d/%d samples done, %.1f min, %.2f samples/min, ETA %.1f min", self.name, self.count,
                 self.total, elapsed / 60, self.count / elapsed * 60, eta / 60)


async def eval_rollout_async(args, rollout_id: int) -> RolloutFnEvalOutput:
    """Generate and score every eval prompt `--n-samples-per-eval-prompt` times; no filtering."""
    params = sampling_params_from_args(args, evaluation=True)
    n = int(getattr(args, "n_samples_per_eval_prompt", None) or 1)
    state = RolloutState(args)
    data, metrics = {}, {}
    for name, path in _eval_datasets(args).items():
        groups, index = [], 0
        for group_index, prompt in enumerate(_eval_prompts(args, path)):
            group = []
            for _ in range(n):
                sample = copy.deepcopy(prompt)
                sample.group_index, sample.index = group_index, index
                index += 1
                group.append(sample)
            groups.append(group)
        progress = EvalProgress(name, len(groups) * n)

        async def counted(group):
            result = await generate_and_rm_group(args, group, params, True, state)
            progress.done(len(group))
            return result

        results = await asyncio.gather(*(counted(g) for g in groups))
        samples = _trajectories(results)
        rewards = [_eval_reward(args, s) for s in samples]
        truncated = [s.status == Sample.Status.TRUNCATED for s in samples]
        # metrics count trajectories; the dump keeps every step sample of a multi-step generator, so an episode's
        # earlier turns (the commands an agent ran) are in the run files, not only its last reply
        data[name] = {"rewards": rewards, "truncated": truncated, "samples": samples, "steps": flatten_samples(results)}
        metrics[f"eval/{name}"] = statistics.fmean(rewards) if rewards else math.nan
        metrics[f"eval/{name}-truncated_ratio"] = sum(truncated) / len(truncated) if truncated else math.nan
        lengths = [s.response_length for s in samples]
        metrics[f"eval/{name}/response_len/mean"] = statistics.fmean(lengths) if lengths else math.nan
        metrics.update(_reward_component_means(f"eval/{name}", samples))
    return RolloutFnEvalOutput(data=data, metrics=metrics)


# --------------------------------------------------------------------------------------------------
# sync entry point
# --------------------------------------------------------------------------------------------------


async def _run_and_close(coro):
    try:
        return await coro
    finally:
        await close_engine_clients()


def _run_in_new_loop(coro):
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # This thread already runs a loop (asyncio.run would refuse): use a helper thread's loop.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rollout") as pool:
        return pool.submit(asyncio.run, coro).result()


def run_coroutine(coro):
    """Run `coro` to completion in a fresh event loop and close the engine clients it opened."""
    return _run_in_new_loop(_run_and_close(coro))


def generate_rollout(args, rollout_id: int, data_source, evaluation: bool = False):
    """slime's rollout-function contract: `RolloutFnTrainOutput` (train) or `RolloutFnEvalOutput` (eval)."""
    return run_coroutine(generate_rollout_async(args, rollout_id, data_source, evaluation))
