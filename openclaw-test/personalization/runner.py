"""Does the agent get better by talking to it? One measured run.

`run_experiment(config)` starts the conversation RL server with a method's launch script (or attaches to a
running one), lets a persona talk to it for N interactions, and at each checkpoint waits until the trainer
has trained on every full batch of those interactions and the engine serves the new weights, then rates the
live policy on held-out requests (the 36 held-out problems of the training templates and the out-of-template
problems, sampled fresh per seed) and scores the persona's probes (the log-probability of the preferred opening).
It writes `result.json` (config, rating versions, the base rates untold and told with the judge's hints, the
learning curve, wall times, the server's stats), the per-reply files `interactions.jsonl.gz` and
`eval_<n>[_ood].jsonl.gz`, the trainer's metrics `train_metrics.jsonl.gz`, and `curve.png`.

The config is a plain mapping (the Hydra app in `openclaw-test/run.py` composes it; see the YAML groups in
`openclaw-test/conf/`).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import os
import random
import shutil
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from personalization.client import ServerClient
from personalization.personas import Persona, get_persona
from personalization.personas import heldout_requests
from personalization.probes import probe_request_logprobs, summarize_probe
from personalization.problems import load_problems
from personalization.report import plot_curve, training_replies
from personalization.simulate import Generation, ScriptedReactor, converse, evaluate, told_hints

__all__ = ["Progress", "run_experiment", "wait_for_training"]

log = logging.getLogger(__name__)
logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request would bury the progress lines
REPO_ROOT = Path(__file__).resolve().parents[2]  # openclaw-test/personalization/runner.py -> the checkout


class Progress:
    """A periodic console line: done/total, rate, ETA and the running preference of recent interactions."""

    def __init__(self, total: int, label: str, every: float = 15.0):
        self.total, self.label, self.every = total, label, every
        self.started = time.monotonic()
        self.last = 0.0
        self.done = 0
        self.recent: list[float] = []

    def update(self, done: int, preference: float | None = None, force: bool = False) -> None:
        self.done = done
        if preference is not None:
            self.recent = (self.recent + [preference])[-16:]
        now = time.monotonic()
        if not force and now - self.last < self.every:
            return
        self.last = now
        elapsed = now - self.started
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - done) / rate if rate > 0 else float("nan")
        recent = sum(self.recent) / len(self.recent) if self.recent else float("nan")
        print(f"[{self.label}] {done}/{self.total} interactions  {rate * 60:.1f}/min  ETA {eta / 60:.1f} min  "
              f"preference (last {len(self.recent)}) {recent:.2f}", flush=True)


async def wait_for_training(client: ServerClient, *, judged_target: int, batch_size: int, base: dict,
                            timeout: float = 3600.0, poll: float = 1.0) -> dict:
    """Block until every interaction so far is judged, every full batch of their samples is trained, and the
    engine serves the weights of the last step. `base` holds the counters at the start of the run (attach mode
    can start on a store with history). Returns the last stats."""
    deadline = time.monotonic() + timeout
    last_report = 0.0
    while True:
        stats = await client.stats()
        version = await client.weight_version()
        judged = stats["judged"] - base["judged"]
        samples = stats["samples"]
        steps = stats.get("trained_batches", 0) - base["trained_batches"]
        published = version - base["weight_version"]
        settled = (judged >= judged_target and samples["in_batch"] == 0 and samples["pending"] < batch_size
                   and published >= steps)
        if settled:
            return {**stats, "weight_version": version}
        if time.monotonic() > deadline:
            raise TimeoutError(f"training did not catch up in {timeout:.0f} s: judged {judged}/{judged_target}, "
                               f"samples {samples}, trained steps {steps}, published {published}")
        if time.monotonic() - last_report > 30:
            last_report = time.monotonic()
            print(f"  waiting for the trainer: judged {judged}/{judged_target}, samples {samples}, "
                  f"steps {steps}, weights published {published}", flush=True)
        await asyncio.sleep(poll)


def _interaction_plan(config: Mapping, persona: Persona):
    problems = load_problems("train")
    order = list(range(len(problems)))
    random.Random(f"order:{config['seed']}:{persona.name}").shuffle(order)
    return problems, order


async def _talk(client: ServerClient, config: Mapping, persona: Persona, target: int, state: dict,
                progress: Progress, log_file) -> None:
    """Conversations until exactly `target` interactions (assistant turns) exist; turns are reserved before a
    conversation starts, so concurrent conversations never overshoot."""
    problems, order = state["problems"], state["order"]
    generation = Generation(**config["generation"])

    async def worker():
        while True:
            remaining = target - state["done"] - state["reserved"]
            if remaining <= 0:
                return
            turns = min(int(config["max_turns"]), remaining)
            state["reserved"] += turns
            index = state["conversations"]
            state["conversations"] += 1
            problem = problems[order[index % len(order)]]
            rng = random.Random(f"{config['seed']}:{persona.name}:{index}")
            try:
                made = await converse(client, persona, problem, rng, max_turns=turns, generation=generation,
                                      system_prompt=config.get("system_prompt"), first_index=state["done"],
                                      session_prefix=f"sim{config['seed']}", reactor=state["reactor"])
            finally:
                state["reserved"] -= turns
            for item in made:
                item.index = state["done"]
                state["done"] += 1
                log_file.write(json.dumps(asdict(item)) + "\n")
                progress.update(state["done"], item.preference)
            log_file.flush()

    await asyncio.gather(*[worker() for _ in range(int(config["concurrency"]))])


EVAL_PROTOCOL = "v2"  # v1: 24 prompts x 1 fixed sample, told = the persona's own hint; v2: see eval_settings


def eval_settings(config: Mapping) -> dict:
    """The evaluation protocol of a run, from `config["eval"]` (older configs lack the v2 keys)."""
    ev = config["eval"]
    told = ev.get("told", "persona" if ev.get("hint_baseline", True) else "none")
    if told not in ("judge", "persona", "none"):
        raise ValueError(f"eval.told must be judge, persona or none, not {told!r}")
    seed = int(ev["seed"]) + (100_000 * int(config["seed"]) if ev.get("fresh_per_seed", False) else 0)
    return {"num_prompts": int(ev["num_prompts"]), "samples_per_prompt": int(ev["samples_per_prompt"]),
            "ood_prompts": int(ev.get("ood_prompts", 0)), "told": told, "seed": seed,
            "concurrency": int(ev["concurrency"]), "probes": bool(ev.get("probes", True))}


class Evaluator:
    """The held-out measurements of one run: ratings of sampled replies (held out and out of template) and the
    probe log-probabilities, each written next to the result."""

    def __init__(self, client: ServerClient, config: Mapping, persona: Persona, out_dir: Path, engine=None,
                 builder=None):
        self.client, self.config, self.persona, self.out_dir = client, config, persona, out_dir
        self.settings = eval_settings(config)
        self.generation = Generation(**config["generation"])
        self.heldout = load_problems("heldout")[: self.settings["num_prompts"]]
        self.ood = load_problems("ood")[: self.settings["ood_prompts"]]
        self.hints = told_hints(persona, self.settings["told"]) if self.settings["told"] != "none" else []
        self.engine, self.builder = engine, builder

    async def rate(self, label: str, problems, hints=None) -> dict:
        started = time.monotonic()
        result = await evaluate(self.client, self.persona, problems, hints=hints,
                                samples_per_prompt=self.settings["samples_per_prompt"], generation=self.generation,
                                system_prompt=self.config.get("system_prompt"),
                                concurrency=self.settings["concurrency"], seed=self.settings["seed"])
        with open(self.out_dir / f"eval_{label}.jsonl", "w") as f:
            for item in result.items:
                f.write(json.dumps(item) + "\n")
        summary = {**result.summary(), "seconds": round(time.monotonic() - started, 1)}
        print(f"  eval {label}: pleased {summary['pleased']:.3f}  preference {summary['preference']:.3f}  "
              f"quality {summary['quality']:.3f}  (n={summary['n']}, {summary['seconds']:.0f} s)", flush=True)
        return summary

    @property
    def can_probe(self) -> bool:
        return bool(self.settings["probes"] and self.persona.probes and self.engine is not None)

    async def probe(self, hints=None) -> dict | None:
        if not self.can_probe:
            return None
        requests = heldout_requests(self.persona, self.heldout, seed=self.settings["seed"])
        temperature = float(self.generation.temperature)
        logprobs = await probe_request_logprobs(self.engine, self.builder, requests, self.persona.probes,
                                                temperature, hints=hints, system_prompt=self.config.get("system_prompt"))
        summary = summarize_probe(logprobs, self.persona.probes, temperature)
        print(f"  probe{' (told)' if hints else ''}: P(opens with {' | '.join(self.persona.probes)}) "
              f"{summary['prob']:.5f}, mean log-prob {summary['logprob']:.3f}", flush=True)
        return summary

    async def base(self) -> dict:
        """The told measurements, made once before training (the untold ones are checkpoint 0)."""
        out = {}
        if self.hints:
            out["base_with_hint"] = {**await self.rate("0_hint", self.heldout, hints=self.hints),
                                     "source": self.settings["told"], "hints": self.hints}
            if self.ood:
                out["base_with_hint_ood"] = await self.rate("0_hint_ood", self.ood, hints=self.hints)
            if self.can_probe:
                out["probe_told"] = await self.probe(hints=self.hints)
        return out

    async def checkpoint(self, label: str) -> dict:
        point = await self.rate(label, self.heldout)
        if self.ood:
            point["ood"] = await self.rate(f"{label}_ood", self.ood)
        if self.can_probe:
            point["probe"] = await self.probe()
        return point


async def run_against(url: str, config: Mapping, out_dir: Path, started: float, engine_url: str | None = None
                      ) -> dict:
    """The experiment against a server that is already up at `url` (`engine_url`: its policy engine, for the
    probes; without it they are skipped)."""
    persona = get_persona(config["persona"]["name"])
    client = ServerClient(url, api_key=config["server"].get("api_key") or os.environ.get("OPENCLAW_PROXY_API_KEY"))
    reactor = build_reactor(config.get("user"))
    engine = None
    try:
        engine, builder = _probe_engine(config, persona, engine_url)
        evaluator = Evaluator(client, config, persona, out_dir, engine, builder)
        client.model = await client.served_model()
        stats = await client.stats()
        base = {"judged": stats["judged"], "trained_batches": stats.get("trained_batches", 0),
                "weight_version": await client.weight_version()}
        batch_size = int(config["trainer"]["batch_size"])
        result = {"config": plain_config(config), "versions": persona.versions, "persona": persona.name,
                  "method": config["method"]["name"], "model": config["model"]["name"], "seed": config["seed"],
                  "variant": run_variant(config), "eval_protocol": EVAL_PROTOCOL,
                  "eval": evaluator.settings, "heldout_prompts": len(evaluator.heldout), "curve": [],
                  "host": {"cpus": usable_cpus(), "load_at_start": load_average()}}
        print(f"[{persona.name}/{config['method']['name']}/seed {config['seed']}] base rates on "
              f"{len(evaluator.heldout)} held-out and {len(evaluator.ood)} out-of-template prompts x "
              f"{evaluator.settings['samples_per_prompt']}", flush=True)
        result.update(await evaluator.base())
        state = {"done": 0, "reserved": 0, "conversations": 0, "reactor": reactor}
        state["problems"], state["order"] = _interaction_plan(config, persona)
        checkpoints = sorted({0, *[int(c) for c in config["checkpoints"]]})
        progress = Progress(checkpoints[-1], f"{persona.name}/{config['method']['name']}")
        probe_every = int(config["eval"].get("probe_every") or 0) if evaluator.can_probe else 0
        result["probe_curve"] = []
        with open(out_dir / "interactions.jsonl", "a") as log_file:
            for checkpoint in checkpoints:
                while checkpoint > state["done"]:
                    # between checkpoints, the probes alone every `probe_every` interactions (on whatever weights
                    # are served then: no wait for the trainer), so the curve has more points than the ratings
                    stop = checkpoint if not probe_every else min(checkpoint, (state["done"] // probe_every + 1)
                                                                  * probe_every)
                    await _talk(client, config, persona, stop, state, progress, log_file)
                    progress.update(state["done"], force=True)
                    if probe_every and stop < checkpoint:
                        result["probe_curve"].append({"interactions": stop, "weight_version": await
                                                      client.weight_version(), **await evaluator.probe()})
                talk_done = time.monotonic()
                stats = await wait_for_training(client, judged_target=state["done"], batch_size=batch_size,
                                                base=base, timeout=float(config["sync_timeout"]))
                synced = time.monotonic()
                point = await evaluator.checkpoint(str(checkpoint))
                if "probe" in point:
                    result["probe_curve"].append({"interactions": checkpoint,
                                                  "weight_version": stats["weight_version"], **point["probe"]})
                point.update({"interactions": checkpoint, "conversations": state["conversations"],
                              "train_steps": stats.get("trained_batches", 0) - base["trained_batches"],
                              "weight_version": stats["weight_version"],
                              "wall_seconds": round(synced - started, 1),
                              "wait_for_trainer_seconds": round(synced - talk_done, 1),
                              "rewards": stats["rewards"], "samples": stats["samples"]})
                result["curve"].append(point)
                _write_result(out_dir, result)
        with open(out_dir / "interactions.jsonl") as log_file:  # appended to: a reused folder holds older runs
            rows = [json.loads(line) for line in log_file if line.strip()]
        result["training_replies"] = training_replies(rows[len(rows) - state["done"]:])
        result["server_stats"] = await client.stats()
        result["user"] = {"kind": type(reactor).__name__,
                          **{k: getattr(reactor, k) for k in ("calls", "fallbacks") if hasattr(reactor, k)}}
        result["wall_seconds"] = round(time.monotonic() - started, 1)
        result["host"]["load_at_end"] = load_average()
        _write_result(out_dir, result)
        return result
    finally:
        await client.aclose()
        if engine is not None:
            await engine.aclose()
        if hasattr(reactor, "aclose"):
            await reactor.aclose()


def _probe_engine(config: Mapping, persona: Persona, engine_url: str | None):
    """(engine client, prompt builder) for the probes, or (None, None) when there is nothing to probe or no
    engine URL to score with."""
    engine_url = engine_url or config["server"].get("engine_url")
    if not (persona.probes and engine_url and config["eval"].get("probes", True)):
        return None, None
    from transformers import AutoTokenizer

    from slime.conversation.teacher import TeacherPromptBuilder
    from slime.engine.client import AsyncEngineClient
    from slime.models.registry import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(str(config["model"]["path"])))
    return AsyncEngineClient(engine_url, api_key=os.environ.get("SLIME_ENGINE_API_KEY")), TeacherPromptBuilder(tokenizer)


def usable_cpus() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def load_average() -> float | None:
    """The 1-minute load average, recorded with the wall times: a run keeps about 1.5 CPUs busy by itself, so a
    load well above that means other jobs shared the machine."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def build_reactor(user: Mapping | None):
    """The persona's scripted reactions (default), or an LLM behind an OpenAI-compatible URL playing it."""
    kind = (user or {}).get("kind", "scripted")
    if kind == "scripted":
        return ScriptedReactor()
    if kind == "llm":
        from personalization.llm_user import LLMReactor

        return LLMReactor.from_config(user)
    raise ValueError(f"user.kind must be 'scripted' or 'llm', not {kind!r}")


def _write_result(out_dir: Path, result: dict) -> None:
    tmp = out_dir / "result.json.tmp"
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(out_dir / "result.json")


def run_variant(config) -> str:
    """The run's variant tag: `variant=...` when given, else the method's own tag (a method config that is a
    measured configuration of another method, e.g. combine_head = combine_topk [fwd-head4])."""
    return str(config.get("variant") or (config.get("method") or {}).get("variant") or "")


def plain_config(config: Mapping) -> dict:
    """A plain dict of an OmegaConf node or a mapping, nested values too, that serialises as JSON."""
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(config):
            return OmegaConf.to_container(config, resolve=True)
    except ImportError:
        pass
    return json.loads(json.dumps(config, default=str))


def server_command(config: Mapping) -> tuple[str, list[str], dict]:
    """(launch script, trainer flags, environment) for starting the server of `config`."""
    method, model, judge, trainer = config["method"], config["model"], config["judge"], config["trainer"]
    args = ["--hf-checkpoint", str(model["path"]), "--seed", str(config["seed"]),
            "--rollout-max-response-len", str(config["generation"]["max_tokens"]),
            "--rollout-temperature", str(config["generation"]["temperature"])]
    if judge.get("hint_judge"):
        args += ["--hint-judge-type", str(judge["hint_judge"])]
    args += [str(a) for a in (judge.get("extra_args") or [])]
    args += [str(a) for a in (method.get("extra_args") or [])]
    args += [str(a) for a in (trainer.get("extra_args") or [])]
    env = {"ROLLOUT_BATCH_SIZE": str(trainer["batch_size"]), "LR": str(trainer["lr"]),
           "KL_LOSS_COEF": str(trainer.get("kl_loss_coef", 0.05)),
           "PRM_TYPE": str(judge["prm_type"]), "PRM_M": str(judge.get("prm_m", 3))}
    return str(REPO_ROOT / method["script"]), args, env


def remove_checkpoints(ckpt_dir: Path) -> int:
    """Delete a finished run's trainer checkpoints; returns the bytes freed.

    A run's product is its held-out ratings, not its weights, and every checkpoint of SmolLM2 with its optimizer
    state is 1.6 GB (a run keeps 3.6-4 GB): the 45 runs of the results table would need about 170 GB of disk.
    """
    if not ckpt_dir.is_dir():
        return 0
    freed = sum(f.stat().st_size for f in ckpt_dir.rglob("*") if f.is_file() and not f.is_symlink())
    shutil.rmtree(ckpt_dir)
    print(f"removed the trainer's checkpoints ({freed / 2**30:.1f} GiB; keep_checkpoints=true keeps them)", flush=True)
    return freed


def _stop_on_signals() -> None:
    """SIGTERM and SIGINT end the run through KeyboardInterrupt, so the server it started is stopped cleanly --
    also when the runner was started in the background (nohup, `&`), where SIGINT is inherited as ignored."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, interrupt)


def run_experiment(config: Mapping, out_dir: str | Path) -> dict:
    """Start (or attach to) the server, run the experiment, stop what was started. Returns the result."""
    _stop_on_signals()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    url = config["server"].get("url")
    if url:
        result = asyncio.run(run_against(url, config, out_dir, started))
    else:
        from slime.conversation.launch import ConversationJob

        script, args, env = server_command(config)
        env["RUN_DIR"] = str(out_dir / "server")
        env["SAVE_CKPT"] = str(out_dir / "server" / "ckpt")  # the GPU scripts' checkpoint folder (CPU: RUN_DIR/ckpt)
        port = config["server"].get("port")
        print(f"starting {Path(script).name} {' '.join(args)} (log: {out_dir / 'server.log'})", flush=True)
        with ConversationJob(script, *args, env=env, port=int(port) if port else None,
                             log_path=out_dir / "server.log",
                             ready_timeout=float(config["server"]["ready_timeout"])) as job:
            result = asyncio.run(run_against(job.url, config, out_dir, started,
                                             engine_url=policy_engine_url(out_dir / "server")))
        if not config.get("keep_checkpoints", False):
            result["checkpoints_removed_bytes"] = remove_checkpoints(out_dir / "server" / "ckpt")
            _write_result(out_dir, result)
    pack_run_files(out_dir)
    plot_curve(result, out_dir / "curve.png")
    return result


def policy_engine_url(server_dir: Path) -> str | None:
    """The policy engine's URL from the settings file the trainer hands the proxy (None before it exists)."""
    from slime.conversation.settings import SETTINGS_FILE

    try:
        return json.loads((server_dir / SETTINGS_FILE).read_text()).get("engine_url")
    except (OSError, ValueError):
        return None


def pack_run_files(out_dir: Path) -> list[Path]:
    """Compress the per-reply files (`eval_*.jsonl`, `interactions.jsonl`) and a copy of the trainer's metrics
    (`server/metrics.jsonl` -> `train_metrics.jsonl.gz`) so that a run folder can be committed whole: every
    claim about single replies or the trainer's KL can be checked from the repository."""
    packed = []
    sources = [(p, p.with_name(p.name + ".gz"), True) for p in sorted(out_dir.glob("eval_*.jsonl"))]
    sources.append((out_dir / "interactions.jsonl", out_dir / "interactions.jsonl.gz", True))
    sources.append((out_dir / "server" / "metrics.jsonl", out_dir / "train_metrics.jsonl.gz", False))
    for source, target, remove in sources:
        if not source.is_file():
            continue
        with open(source, "rb") as f_in, gzip.open(target, "wb", compresslevel=9) as f_out:
            shutil.copyfileobj(f_in, f_out)
        if remove:
            source.unlink()
        packed.append(target)
    return packed
