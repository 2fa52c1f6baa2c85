"""The training loops behind `slime/train.py` (synchronous) and `slime/train_async.py` (one-step overlap).

Launched by torchrun: every rank trains; rank 0 also owns the engines, the data source and the rollout
function, and publishes weights after optimizer steps. Per rollout id:

  sync:  generate(k) -> train(k) -> publish -> generate(k+1) ...          (samples are never stale)
  async: generate(k+1) runs in a thread while train(k) runs; before publishing, wait for it, so no
         engine request straddles a weight change and batch k+1 is exactly one version behind.
         Live traffic (a data source with `live_traffic = True`, e.g. conversations) publishes right
         after the step instead: users keep talking to the newest weights, each sample records its
         version, and `rollout/staleness` reports the lag.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch

from slime.backends.fsdp.actor import FSDPActor
from slime.backends.fsdp.parallel import barrier, broadcast_object, init_distributed, leave_together
from slime.engine.client import weight_version_number
from slime.rollout import RolloutInterrupted
from slime.training import checkpoint
from slime.training.advantages import attach_advantages
from slime.training.engines import EnginesFailedOnSomeNode, RolloutEngines, set_router_addresses, start_node_engines
from slime.training.tracking import Tracker, console_line
from slime.training.train_data import (drop_constant, post_process_rewards, rollout_metrics, shard_for_ranks,
                                       take_whole_steps, to_rows)
from slime.training.weight_sync import check_vllm_can_take_full_weights, make_publisher
from slime.utils.ppo_utils import SingletonGroupTracker
from slime.utils.types import RolloutFnTrainOutput, flatten_samples

log = logging.getLogger("slime.train")

_SHARED_DIRS = ("run_dir", "tb_dir", "wandb_dir", "update_weight_disk_dir")


class StopFlag:
    """SIGINT/SIGTERM ask for a clean stop: finish the current step, checkpoint, stop engines, exit."""

    def __init__(self):
        self.requested = False
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum, frame):
        if self.requested:  # a second Ctrl-C means now
            raise KeyboardInterrupt
        self.requested = True
        log.warning("stop requested (signal %d): finishing this step, then checkpoint and exit", signum)


class RolloutProducer:
    """Rank 0: turns the rollout function's output into per-rank rows, synchronously or one step ahead."""

    def __init__(self, args, data_source, dp_size: int):
        self.args = args
        self.data_source = data_source
        self.dp_size = dp_size  # one shard per data-parallel rank (tensor-parallel peers share it)
        self.rollout_fn = args.hooks["rollout_function_path"]
        self.tracker = SingletonGroupTracker()
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rollout")
        self.pending: dict[int, Future] = {}
        self.state_before: dict[int, dict | None] = {}
        self.carried: list[dict] = []  # rows beyond the last whole optimizer step, trained with the next rollout
        self.sources: dict[int, list[int]] = {}  # rollout id -> the rollouts its trained rows came from

    def _data_state(self):
        return self.data_source.state_dict() if hasattr(self.data_source, "state_dict") else None

    def _produce(self, rollout_id: int):
        started = time.perf_counter()
        output = self.rollout_fn(self.args, rollout_id, self.data_source)
        if not isinstance(output, RolloutFnTrainOutput):
            output = RolloutFnTrainOutput(samples=output)
        samples = flatten_samples(output.samples)
        if self.args.save_debug_rollout_data:
            _dump_samples(self.args.save_debug_rollout_data.format(rollout_id=rollout_id), samples)
        produced = samples  # what the custom rollout log sees: every sample, before constant groups are dropped
        samples, dropped = drop_constant(self.args, samples)
        raw, rewards, metrics = post_process_rewards(self.args, samples, self.tracker)
        metrics.update(dropped)
        new_rows = to_rows(self.args, samples, rewards, raw)
        for row in new_rows:
            row["rollout_id"] = rollout_id  # which rollout a (possibly carried) row came from, for mark_trained
        rows, self.carried = take_whole_steps(self.carried + new_rows, self.args.global_batch_size)
        if self.carried:
            log.info("rollout %d: %d sample(s) beyond a whole number of steps (--global-batch-size %d) carry over to "
                     "the next rollout", rollout_id, len(self.carried), self.args.global_batch_size)
        metrics["rollout/carried_samples"] = len(self.carried)
        logged_by_hook = self._custom_rollout_log(rollout_id, produced, output.metrics or {}, started)
        if not rows:  # e.g. most groups dropped as constant: no optimizer step this time, the rows wait
            log.warning("rollout %d: %d sample(s), fewer than --global-batch-size %d: no optimizer step this rollout",
                        rollout_id, len(self.carried), self.args.global_batch_size)
            metrics.update(output.metrics or {})
            return [[] for _ in range(self.dp_size)], metrics
        # a rollout counts as trained once none of its rows wait in the carry (they train with a later rollout)
        waiting = {r["rollout_id"] for r in self.carried}
        self.sources[rollout_id] = sorted({r["rollout_id"] for r in rows} - waiting)
        if not logged_by_hook:
            metrics.update(rollout_metrics(rows, samples))
        metrics.update(output.metrics or {})
        metrics["perf/rollout_time"] = time.perf_counter() - started
        return shard_for_ranks(rows, self.args.global_batch_size, self.dp_size), metrics

    def _custom_rollout_log(self, rollout_id: int, samples, extra_metrics: dict, started: float) -> bool:
        """`--custom-rollout-log-function-path`, once per rollout with every sample the rollout produced (upstream's
        call); True from it means it logged the rollout itself, so the default per-sample statistics are not."""
        hook = self.args.hooks.get("custom_rollout_log_function_path")
        if hook is None:
            return False
        return bool(hook(rollout_id, self.args, samples, extra_metrics, time.perf_counter() - started))

    def start(self, rollout_id: int):
        """Begin generating `rollout_id` in the background (async mode)."""
        self.state_before[rollout_id] = self._data_state()
        self.pending[rollout_id] = self.pool.submit(self._produce, rollout_id)

    def get(self, rollout_id: int):
        if rollout_id not in self.pending:
            self.state_before[rollout_id] = self._data_state()
            return self._produce(rollout_id)
        return self.pending.pop(rollout_id).result()

    def wait(self, rollout_id: int):
        """Block until a background rollout finished (its result stays available to `get`)."""
        future = self.pending.get(rollout_id)
        if future is not None:
            future.exception()

    def resume_state(self, next_rollout_id: int):
        """Data-source state a resumed run must start from: as it was before generating `next_rollout_id`."""
        return self.state_before.get(next_rollout_id, self._data_state())

    @property
    def live_traffic(self) -> bool:
        """Data that real users generate (conversations) is served by whatever weights are live and records
        their version; publishing must not wait until the next batch is full, or feedback would only reach
        the model one whole batch later."""
        return bool(getattr(self.data_source, "live_traffic", False))

    def mark_trained(self, rollout_id: int):
        """Tell a data source that keeps per-sample state (live conversations) that a batch has trained: every
        rollout whose rows were in it (carried rows come from an earlier one)."""
        if hasattr(self.data_source, "mark_trained"):
            for source in self.sources.pop(rollout_id, []):
                self.data_source.mark_trained(source)

    def close(self):
        for future in self.pending.values():
            future.cancel()
        self.pool.shutdown(wait=True, cancel_futures=True)
        if hasattr(self.data_source, "close"):
            self.data_source.close()


def _dump_samples(path: str, samples) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for sample in samples:
            f.write(sample.to_json() + "\n")


def _staleness(rows: list[dict], version: int) -> float:
    versions = [int(r["weight_version"]) for r in rows if str(r.get("weight_version", "")).isdigit()]
    return sum(version - v for v in versions) / len(versions) if versions else 0.0


def train_on_rollout(args, actor: FSDPActor, rows: list[dict], dist) -> list[dict]:
    """Old/ref log-probs, advantages, then the optimizer steps of one rollout on this rank's rows."""
    # the SFT loss is a plain likelihood: it needs no old log-probs, only ref log-probs when a KL term is on
    sft = args.loss_type == "sft_loss"
    if not args.disable_compute_advantages_and_returns:
        if args.use_rollout_logprobs and not sft:
            for row in rows:
                row["old_log_probs"] = list(row["rollout_log_probs"])
        elif not sft:
            for row, lp in zip(rows, actor.compute_log_probs(rows)):
                row["old_log_probs"] = lp
        if args.ref_model_needed and args.kl_loss_topk:
            for row, (lp, top_lp, top_ids) in zip(rows, actor.compute_ref_log_probs_and_topk(rows, args.kl_loss_topk)):
                row["ref_log_probs"], row["ref_topk_log_probs"], row["ref_topk_indices"] = lp, top_lp, top_ids
        elif args.ref_model_needed:
            for row, lp in zip(rows, actor.compute_log_probs(rows, use_ref=True)):
                row["ref_log_probs"] = lp
        if not sft:
            attach_advantages(args, rows, dist.device)
    local = args.global_batch_size // actor.dp_size
    return [actor.train_step(rows[s : s + local], args.global_batch_size) for s in range(0, len(rows), local)]


def _model_parallel_size(args) -> int:
    """Ranks that hold one copy of the model (TP x PP x CP; PP and CP > 1 only exist on the megatron backend)."""
    return ((getattr(args, "tensor_model_parallel_size", 1) or 1) * (getattr(args, "pipeline_model_parallel_size", 1) or 1)
            * (getattr(args, "context_parallel_size", 1) or 1))


def build_actor(args, dist, model_path: str, tokenizer, resume):
    """The --train-backend: FSDPActor, or MegatronActor (megatron-core, imported only when asked for)."""
    if args.train_backend == "megatron":
        from slime.backends.megatron.actor import MegatronActor

        return MegatronActor(args, dist, model_path, tokenizer, resume_dir=resume)
    return FSDPActor(args, dist, model_path, tokenizer, resume_dir=resume)


def main(mode: str, argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(name)s: %(message)s", stream=sys.stdout)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per engine request otherwise
    from slime.models import resolve_model_path
    from slime.backends.fsdp.parallel import data_parallel_size
    from slime.utils.arguments import parse_trainer_args, validate_args
    from slime.utils.hooks import load_hooks

    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    args = parse_trainer_args(argv)
    try:  # batches are split over data-parallel ranks: ranks / tensor-parallel size
        dp_size = data_parallel_size(world_size, _model_parallel_size(args))
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    args = validate_args(args, mode=mode, world_size=dp_size)
    dist = init_distributed(args.device, args.distributed_timeout_minutes)
    # derived output folders contain a timestamp: every rank must use rank 0's
    for name, value in broadcast_object({k: getattr(args, k, None) for k in _SHARED_DIRS}).items():
        setattr(args, name, value)
    torch.manual_seed(args.seed + dist.rank)
    run_dir = Path(args.run_dir)
    if dist.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        model_path = resolve_model_path(args.hf_checkpoint)  # may convert/build once: rank 0 first
    barrier()
    model_path = resolve_model_path(args.hf_checkpoint)
    if not args.ref_load or args.ref_load == args.hf_checkpoint:
        args.ref_load = str(model_path)
    args.hooks = load_hooks(args)

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    resume = checkpoint.resolve_load(args.load)
    meta = checkpoint.load_meta(resume) if resume else None
    if meta and meta["world_size"] != dist.world_size:
        raise SystemExit(f"--load {resume}: written by {meta['world_size']} ranks, resuming with {dist.world_size}")
    actor = build_actor(args, dist, str(model_path), tokenizer, resume)
    start_rollout = 0
    if resume:
        actor.load_training_state(resume)
        checkpoint.restore_rng(resume, dist.rank)
        start_rollout = meta["next_rollout_id"]
    log.info("rank %d/%d: %s, %d trainable parameters, %s, %s", dist.rank, dist.world_size,
             model_path.name, actor.num_trainable, actor.parallel_description, "resumed from " + str(resume) if resume else "fresh")

    stop = StopFlag()
    args.stop_flag = stop  # rollout functions that wait for live traffic check it
    engines = node_engines = producer = publisher = None
    tracker = Tracker(args, run_dir, enabled=dist.is_main)
    try:
        check_vllm_can_take_full_weights(args)  # every rank, before any engine starts
        # collective: every node's local rank 0 starts its node's SGLang/vLLM engines, rank 0 gets all (+ routers)
        node_engines = start_node_engines(args, run_dir, dist, model_path)
        if dist.is_main:
            engines = RolloutEngines(args, model_path, run_dir, started=node_engines.get("rollout"))
            args.engine_urls = engines.urls
            args.num_engine_workers = engines.num_workers  # a router is one URL for N engines (concurrency)
            args.engine_api_key = os.environ.get("SLIME_ENGINE_API_KEY") or None
            args.judge_engines = node_engines.get("prm")  # the conversation data source's judge/teacher
            set_router_addresses(args, engines, args.judge_engines)
            data_source = args.hooks["data_source_path"](args)
            if resume:
                restore_data_source(data_source, resume, meta)
            start_version = meta["weight_version"] if meta else weight_version_number(engines.weight_version())
        else:
            data_source, start_version = None, 0
        start_version = broadcast_object(start_version)
        # every engine gets the weights directly, never through a router (engines.worker_urls)
        publisher = make_publisher(args, engines, dist.is_main, start_version)
        if resume:
            publisher.publish(actor)  # engines must serve the resumed policy, not the base model
        if dist.is_main:
            producer = RolloutProducer(args, data_source, actor.dp_size)
        _run(args, mode, actor, dist, producer, publisher, tracker, stop, start_rollout)
    except EnginesFailedOnSomeNode:
        # every rank raised it at the same point (nothing was started to clean up first): they can leave together,
        # where exiting with live gloo threads could abort a rank and hang its peers
        leave_together()
        raise
    finally:
        if producer is not None:
            producer.close()
        if publisher is not None:
            publisher.close()
        if engines is not None:
            engines.stop()
        if node_engines is not None:
            node_engines.stop()
        tracker.close()
    # Only after a clean finish (a failed rank must not wait here for the others): every rank tears the group
    # down together, since a rank that exits while gloo threads are alive can abort after its work was done.
    leave_together()
    return 0


def _run(args, mode, actor, dist, producer, publisher, tracker, stop, start_rollout):
    from tqdm import tqdm

    total = args.num_rollout
    bar = tqdm(total=total, initial=start_rollout, desc="rollouts", unit="rollout", disable=not dist.is_main,
               dynamic_ncols=True, file=sys.stdout)
    if start_rollout == 0 and _evaluating(args) and not args.skip_eval_before_train:
        # the policy before any training, with the engines to itself (before async mode starts rollout 0)
        _evaluate(args, -1, actor, dist, producer, tracker, bar)
    if mode == "async" and dist.is_main and start_rollout < total:
        producer.start(start_rollout)
    last_saved = last_trained = None
    unpublished = False  # trained weights the engines do not serve yet (a resume published the checkpoint's)
    for rollout_id in range(start_rollout, total):
        if broadcast_object(stop.requested):
            break
        started = time.perf_counter()
        if dist.is_main:
            try:
                shards, metrics = producer.get(rollout_id)
            except RolloutInterrupted as exc:
                log.warning("%s", exc)
                shards, metrics = None, {}
            else:
                if mode == "async" and rollout_id + 1 < total:
                    producer.start(rollout_id + 1)  # overlaps the training below
                metrics["rollout/staleness"] = _staleness([r for s in shards for r in s], publisher.version)
        else:
            shards, metrics = None, {}
        shards = broadcast_object(shards)
        if shards is None:  # interrupted while waiting for data: nothing to train, stop cleanly
            break
        rows = shards[actor.dp_rank]
        # no rows: fewer than one optimizer step (they carry over) or every group dropped as constant; nothing
        # trains this time, but a due evaluation or checkpoint still happens (the last rollout's above all)
        trained = any(shards)
        if trained:
            train_started = time.perf_counter()
            step_metrics = train_on_rollout(args, actor, rows, dist)
            train_time = time.perf_counter() - train_started
            last_trained = rollout_id
            if dist.is_main:
                producer.mark_trained(rollout_id)
            publisher.last_folder = None  # the weights changed: no published folder holds them yet
            unpublished = True
        eval_due = _evaluating(args) and _periodic(rollout_id, args.eval_interval, total)
        # an evaluation publishes too, off the update interval: the engines must serve the weights being evaluated
        if unpublished and ((rollout_id + 1) % args.update_weights_interval == 0 or eval_due):
            if dist.is_main and mode == "async" and not producer.live_traffic:
                producer.wait(rollout_id + 1)
            metrics.update(publisher.publish(actor))
            unpublished = False
        if args.save and _periodic(rollout_id, args.save_interval, total):
            _save(args, rollout_id, actor, dist, producer, publisher)
            last_saved = rollout_id
        if dist.is_main:
            if trained:
                metrics.update({"perf/step_time": time.perf_counter() - started, "perf/train_time": train_time})
                for i, step in enumerate(step_metrics):
                    merged = {**metrics, **step} if i == len(step_metrics) - 1 else step
                    tracker.log(merged, step=actor.global_step - len(step_metrics) + i + 1)
                bar.write(console_line(rollout_id + 1, total, {**metrics, **step_metrics[-1]}))
            else:
                tracker.log(metrics, step=actor.global_step)
                bar.write(f"rollout {rollout_id + 1}/{total}: no optimizer step (no rows to train)")
            bar.update(1)
        if eval_due:
            _evaluate(args, rollout_id, actor, dist, producer, tracker, bar)
    if start_rollout >= total > 0 and _evaluating(args) and _periodic(total - 1, args.eval_interval, total) \
            and not eval_folder(args, total - 1).is_dir():
        # resumed after the last step but before its evaluation was written (stopped during it): evaluate the
        # checkpoint's weights, which the resume published, so the run still ends with its final evaluation
        _evaluate(args, total - 1, actor, dist, producer, tracker, bar)
    bar.close()
    if args.save and last_trained is not None and last_saved != last_trained:
        _save(args, last_trained, actor, dist, producer, publisher)  # at exit, also after a stop request


def _evaluating(args) -> bool:
    """`--eval-interval` (validate_args made sure there is something to evaluate)."""
    return getattr(args, "eval_interval", None) is not None


def eval_folder(args, rollout_id: int) -> Path:
    """Where the evaluation after `rollout_id` (-1: before training) writes its samples."""
    return Path(args.run_dir) / "eval" / ("before_training" if rollout_id < 0 else f"rollout_{rollout_id:06d}")


def eval_samples_to_dump(result: dict) -> list:
    """An evaluated dataset's samples for its run file: every step sample of a multi-step agent (`steps`), else the
    one sample per trajectory its metrics count."""
    return result.get("steps") or result["samples"]


def _evaluate(args, rollout_id: int, actor, dist, producer, tracker, bar) -> None:
    """Rank 0 runs the eval rollout on the weights the engines serve (`rollout_id` -1: before training) and logs
    `eval/...` at the current optimizer step; every sample (every step sample of a multi-step agent) goes to
    `<run dir>/eval/rollout_<id>/<dataset>.jsonl`.
    The other ranks go on to the next collective and wait there."""
    if not dist.is_main:
        return
    started = time.perf_counter()
    output = args.hooks["eval_function_path"](args, rollout_id, producer.data_source, evaluation=True)
    metrics = dict(getattr(output, "metrics", None) or {})
    folder = eval_folder(args, rollout_id)
    for name, result in (getattr(output, "data", None) or {}).items():
        if isinstance(result, dict) and result.get("samples"):
            _dump_samples(str(folder / f"{name}.jsonl"), eval_samples_to_dump(result))
    metrics["perf/eval_time"] = time.perf_counter() - started
    metrics["eval/rollout_id"] = rollout_id
    tracker.log(metrics, step=actor.global_step)
    shown = {k: v for k, v in metrics.items() if k.startswith("eval/") and isinstance(v, (int, float))}
    bar.write(f"eval after {'no training' if rollout_id < 0 else f'rollout {rollout_id + 1}'}: " +
              " ".join(f"{k}={v:.4g}" for k, v in sorted(shown.items())) + f" ({metrics['perf/eval_time']:.0f} s)")


def _periodic(rollout_id: int, interval: int | None, total: int) -> bool:
    return bool(interval) and ((rollout_id + 1) % interval == 0 or rollout_id + 1 == total)


def restore_data_source(data_source, resume: Path, meta: dict) -> None:
    """Put a resumed run's data source where the checkpoint left it: its `load_state_dict` with the state kept in
    the checkpoint, or (upstream's interface, no state dict) its own `load(rollout_id)`."""
    if hasattr(data_source, "load_state_dict"):
        if (state := checkpoint.load_data_source_state(resume)) is not None:
            data_source.load_state_dict(state)
    elif hasattr(data_source, "load"):
        data_source.load(meta["rollout_id"])


def _save(args, rollout_id, actor, dist, producer, publisher):
    if dist.is_main and not hasattr(producer.data_source, "state_dict") and hasattr(producer.data_source, "save"):
        # upstream's interface: the data source writes its own position (under --save); with a rollout generated
        # ahead (async) it has already moved past this one, as upstream's does
        producer.data_source.save(rollout_id)
    state = producer.resume_state(rollout_id + 1) if dist.is_main else None
    folder = checkpoint.save_checkpoint(args.save, rollout_id, actor, dist, state, publisher.version,
                                        exported=publisher.last_folder)
    if dist.is_main:
        log.info("saved %s", folder)
