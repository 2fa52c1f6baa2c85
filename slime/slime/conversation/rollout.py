"""The bridge between live conversations and the trainer.

`ConversationDataSource` (pass it as `--data-source-path`) starts the conversation proxy in front of the
policy engine when the trainer starts, and hands out judged turns from the store as training samples:
a batch is exactly `--rollout-batch-size` *trainable* samples, the oldest first; surplus samples stay
pending for the next batch (upstream dropped them), samples of a batch that never finished training go
back to pending on restart, and trained ones are marked so. Serving never pauses: engines swap weights
between requests, so there is no 503 window (upstream paused submission during every weight sync).

`generate_rollout` is the rollout function (`--rollout-function-path`) that the three conversation folders
re-export under upstream's module names (`openclaw_rollout.py`, `openclaw_opd_rollout.py`,
`openclaw_combine_rollout.py`; upstream had the same drain three times).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from slime.conversation.launch import ProxyProcess
from slime.conversation.settings import SETTINGS_FILE, ConversationSettings
from slime.conversation.store import ConversationStore
from slime.conversation.store_backends import is_postgres
from slime.conversation.lease import TrainerLease
from slime.conversation.source_state import NextBatchState, sample_from_dict
from slime.rollout import RolloutInterrupted
from slime.utils.types import RolloutFnTrainOutput, Sample

log = logging.getLogger("slime.conversation")

POLL_SECONDS = 0.2
PROGRESS_SECONDS = 30.0


class ConversationDataSource(NextBatchState):
    STATE_NAME = "conversation_state"
    live_traffic = True  # the trainer publishes after every step instead of waiting for the next batch

    def __init__(self, args):
        self.args = args
        run_dir = Path(args.run_dir)
        store = args.conversation_store or str(run_dir / "conversations.db")
        self.store_path = store if is_postgres(store) else Path(store)
        self.store = ConversationStore(self.store_path)
        self.lease = TrainerLease(self.store, getattr(args, "trainer_lease_ttl", 60.0))
        self.lease.acquire()  # before anything is released: a live trainer's batch is not ours to hand back
        # in a batch but never marked trained (or a collector's export never finished): train them again
        released = self.store.release_untrained()
        if released:
            log.info("%d sample(s) from an interrupted batch are pending again", released)
        self.judge_engine = None
        self.proxy = None
        self.proxy_url = args.proxy_url
        if not self.proxy_url:
            self._start_proxy(run_dir)
        self.next_batch = 0

    # --- processes ------------------------------------------------------------------------------
    def _start_proxy(self, run_dir: Path):
        """Build the proxy's settings once from the trainer's arguments, hand them over as a file in the run
        directory, and start the proxy on it."""
        args = self.args
        settings = self.proxy_settings(run_dir)
        settings_file = settings.write(run_dir / SETTINGS_FILE)
        env = {}
        engine_key = os.environ.get("SLIME_ENGINE_API_KEY")
        if engine_key and settings.prm_engine_url and not args.prm_engine_url:
            # our own judge/teacher engines require the engines' key too; an outside judge (--prm-engine-url)
            # never gets it
            env["SLIME_JUDGE_API_KEY"] = engine_key
        self.proxy = ProxyProcess(settings_file=settings_file, judge=None, host=settings.proxy_host,
                                  port=settings.proxy_port, api_key=settings.api_key, env=env,
                                  log_path=run_dir / "proxy.log", ready_timeout=300)
        self.proxy.start()
        self.proxy_url = self.proxy.url
        log.info("conversation proxy (%s) serving on http://%s:%d (settings %s, log %s); point OpenClaw at %s/v1",
                 settings.conversation_method, settings.proxy_host, self.proxy.port, settings_file,
                 run_dir / "proxy.log", self.proxy.url)

    def proxy_settings(self, run_dir: Path) -> ConversationSettings:
        """The trainer's conversation flags plus what it derives: the engines the proxy talks to (a judge
        engine only when an LLM judge or a teacher needs one), the sampling limits, the plugin folders."""
        args = self.args
        engine_url = args.engine_urls[0]
        uses_hints = args.conversation_uses_hints
        uses_llm = (args.conversation_uses_reward_judge and args.prm_type == "llm") or \
            (uses_hints and "llm" in args.hint_judge_type.split("+"))
        judge_url = None
        if uses_llm or (uses_hints and not args.self_distillation):
            judge_url = self._judge_engine_url(run_dir)
        teacher_url = None
        if uses_hints:
            teacher_url = engine_url if args.self_distillation else judge_url
        return ConversationSettings.from_trainer_args(
            args, engine_url=engine_url, conversation_store=str(self.store_path), prm_engine_url=judge_url,
            teacher_engine_url=teacher_url,
            # the teacher scores at the temperature the trainer computes the student's log-probs at
            teacher_temperature=args.rollout_temperature or 1.0, temperature=args.rollout_temperature,
            max_response_tokens=args.rollout_max_response_len or None,
            python_path=[str(Path(p).resolve()) for p in args.extra_python_path])

    def _judge_engine_url(self, run_dir: Path) -> str:
        args = self.args
        if self.judge_engine is not None:
            return self.judge_engine.url
        if args.prm_engine_url:
            return args.prm_engine_url
        if not args.prm_enable:
            return args.engine_urls[0]  # the policy engine judges its own turns
        from slime.models import resolve_model_path

        if args.prm_engine != "embedded":
            # SGLang/vLLM judges on the layout's PRM GPUs: the trainer starts them on every node (rank 0 gets the
            # group, which the trainer stops); without a trainer, start this node's here and stop them on close
            group = getattr(args, "judge_engines", None)
            if group is None:
                from slime.training.engines import start_judge_engines

                group = self.judge_engine = start_judge_engines(args, resolve_model_path(args.prm_model_path),
                                                                run_dir)
            if len(group.urls) > 1:
                log.warning("%d judge engines without a router (%s): the proxy uses the first, %s", len(group.urls),
                            group.kind, group.url)
            return group.url
        from slime.engine.launch import EngineProcess
        from slime.training.engines import engine_device_args

        # a frozen copy: it never receives weight updates, so judging stays consistent across steps
        self.judge_engine = EngineProcess(resolve_model_path(args.prm_model_path), *engine_device_args(args),
                                          threads=args.engine_threads,
                                          log_path=run_dir / "judge_engine.log", ready_timeout=600).start()
        return self.judge_engine.url

    def close(self):
        self.lease.release()
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
        if self.judge_engine is not None:
            self.judge_engine.stop()
            self.judge_engine = None
        self.store.close()

    # --- batches --------------------------------------------------------------------------------
    def claim(self, rollout_id: int, n: int) -> list[Sample]:
        started = last_report = time.monotonic()
        start_count = self.store.count_pending_samples()
        stop = getattr(self.args, "stop_flag", None)
        while True:
            claimed = self.store.claim_samples(rollout_id, n, owner=self.lease.owner)
            if claimed is not None:
                self.next_batch = rollout_id + 1
                return [sample_from_dict(d) for d in claimed]
            if stop is not None and stop.requested:
                raise RolloutInterrupted(f"stopped while waiting for conversation samples for rollout {rollout_id}")
            now = time.monotonic()
            if now - last_report >= PROGRESS_SECONDS:
                have = self.store.count_pending_samples()
                rate = max(0, have - start_count) / max(now - started, 1e-9) * 60
                eta = f"{(n - have) / rate:.1f} min" if rate > 0 else "unknown (no new samples yet)"
                log.info("rollout %d: %d/%d trainable samples, %.1f/min, ETA %s (proxy %s)", rollout_id, have, n,
                         rate, eta, self.proxy_url)
                last_report = now
            time.sleep(POLL_SECONDS)

    def mark_trained(self, rollout_id: int) -> None:
        self.store.mark_trained(rollout_id, owner=self.lease.owner)

    def metrics(self) -> dict:
        stats = self.store.stats()
        return {"rollout/pending_samples": stats["samples"]["pending"],
                "rollout/judged_turns": stats["judged"],
                "rollout/judge_failures": stats["judge_failures"],
                "rollout/excluded_turns": sum(stats["excluded"].values())}

    # --- the data-source contract (get_samples / add_samples / save / load) -------------------------
    def get_samples(self, num_groups: int) -> list[list[Sample]]:
        """`num_groups` single-sample groups for the next batch (blocks until that many are judged)."""
        return [[s] for s in self.claim(self.next_batch, num_groups)]

    def add_samples(self, groups: list[list[Sample]]) -> None:
        """Give claimed samples back: they are pending again and go into the next batch first."""
        turn_ids = [s.index for group in groups for s in group]
        self.store.return_samples(turn_ids)

    # checkpoints: the store itself is durable; the state only says which batch comes next
    def state_dict(self) -> dict:
        return {**super().state_dict(), "store": str(self.store_path)}


def generate_rollout(args, rollout_id: int, data_source: ConversationDataSource, evaluation: bool = False):
    """One batch of judged conversation turns; each sample is its own group (n_samples_per_prompt 1)."""
    if evaluation:
        raise NotImplementedError("conversation rollouts have no eval split; evaluate with openclaw-test/")
    if not hasattr(data_source, "claim"):
        raise TypeError("the conversation rollout needs --data-source-path "
                        "slime.conversation.rollout.ConversationDataSource (a store) or "
                        "slime.conversation.rollout_dir.RolloutDirDataSource (a rollout directory)")
    samples = data_source.claim(rollout_id, args.rollout_batch_size)
    rewards = [float(s.reward["score"]) for s in samples]
    metrics = {"rollout/prm_eval_score": sum(rewards) / len(rewards), **data_source.metrics()}
    return RolloutFnTrainOutput(samples=[[s] for s in samples], metrics=metrics)
