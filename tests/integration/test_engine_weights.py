"""`/update_weights_from_disk` on a real engine: full weights, LoRA adapters, swaps under load, errors.

References are computed in this process with transformers (greedy decoding of the same prompt ids),
so "the engine serves the new weights" means: the same tokens and the same log-probs as the model that
was written to disk.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest
import torch

from slime.engine.client import EngineClient, EngineError

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")
TEXTS = [
    "def parse_arguments(argv):\n    \"\"\"Parse the command line and return the options.\"\"\"\n",
    "The quick brown fox jumps over the lazy dog, and then the dog wakes up and chases the fox.",
    "import os\nimport sys\n\nclass Config:\n    def __init__(self, path):\n        self.path = path\n",
    "Return a list of the lines in the string, breaking at line boundaries and keeping them.",
]
N_NEW = 16


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


def load(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


@torch.no_grad()
def greedy(model, prompt_ids: list[int], n: int) -> tuple[list[int], list[float]]:
    """Greedy tokens and their (temperature-1) log-probs, `n` tokens, end-of-turn ignored."""
    out = model(input_ids=torch.tensor([prompt_ids]), use_cache=True)
    tokens, logprobs = [], []
    for i in range(n):
        lp = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
        token = int(lp.argmax())
        tokens.append(token)
        logprobs.append(float(lp[token]))
        if i < n - 1:
            out = model(input_ids=torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True)
    return tokens, logprobs


def engine_greedy(client: EngineClient, prompt_ids: list[int], n: int = N_NEW) -> dict:
    return client.generate(
        input_ids=prompt_ids,
        sampling_params={"temperature": 0, "max_new_tokens": n, "ignore_eos": True},
        return_logprob=True,
    )


def assert_serves(client: EngineClient, model, prompts: list[list[int]], version: str | None = None):
    """Every prompt's greedy continuation and log-probs equal the in-process model's."""
    for prompt in prompts:
        out = engine_greedy(client, prompt)
        ref_tokens, ref_logprobs = greedy(model, prompt, N_NEW)
        assert out["output_ids"] == ref_tokens
        got = [entry[0] for entry in out["meta_info"]["output_token_logprobs"]]
        assert got == pytest.approx(ref_logprobs, abs=1e-3)
        if version is not None:
            assert out["meta_info"]["weight_version"] == version


def max_logprob_gap(a, b, prompts) -> float:
    """How far apart two models are on these prompts (teacher-forced on a's greedy tokens)."""
    gap = 0.0
    for prompt in prompts:
        tokens, lp_a = greedy(a, prompt, N_NEW)
        with torch.no_grad():
            logits = b(input_ids=torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1]
        lp_b = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(tokens).unsqueeze(-1)).squeeze(-1)
        gap = max(gap, max(abs(x - y) for x, y in zip(lp_a, lp_b.tolist())))
    return gap


def copy_tokenizer(src: Path, dst: Path):
    for name in TOKENIZER_FILES:
        if (src / name).exists():
            shutil.copy2(src / name, dst / name)


def save_perturbed(base_path: Path, out: Path, seed: int, scale: float = 0.3) -> Path:
    """The base model with seeded noise on every weight, saved as a full HF folder (+ tokenizer).

    The tiny model's tied, scaled-up embeddings make its greedy output repeat the last prompt token
    whatever the other weights are; replacing the RMSNorm gains with noise (instead of adding to them)
    breaks that, so the perturbed model's greedy tokens differ from the base model's, not just its log-probs.
    """
    model = load(base_path)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if "norm" in name:
                param.copy_(noise)
            else:
                param.add_(noise * scale * param.float().std())
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    copy_tokenizer(Path(base_path), out)
    return out


def save_lora(base_path: Path, out: Path, seed: int) -> Path:
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(load(base_path), config)
    peft_model.save_pretrained(out)
    assert (out / "adapter_config.json").exists()
    return out


def merged(base_model_or_path, adapter: Path):
    from peft import PeftModel

    base = load(base_model_or_path) if isinstance(base_model_or_path, (str, Path)) else base_model_or_path
    return PeftModel.from_pretrained(base, str(adapter)).merge_and_unload().eval()


def server_load(url: str) -> dict:
    return httpx.get(url + "/get_server_info", timeout=10).json()["load"]


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


# --------------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prompts(tiny_model):
    _, tokenizer = tiny_model
    ids = [tokenizer.encode(text) for text in TEXTS]
    assert all(len(p) > 17 for p in ids), "long enough for the prefix cache (16-token minimum)"
    return ids


@pytest.fixture(scope="module")
def perturbed_path(tiny_model_path, tmp_path_factory):
    return save_perturbed(Path(tiny_model_path), tmp_path_factory.mktemp("perturbed") / "model", seed=7)


@pytest.fixture(scope="module")
def perturbed_model(perturbed_path):
    return load(perturbed_path)


@pytest.fixture(scope="module")
def client(engine_server):
    with EngineClient(engine_server.url, timeout=120.0) as c:
        yield c


# --------------------------------------------------------------------------------------------------
# (a) full weights
# --------------------------------------------------------------------------------------------------


def test_full_weight_update(client, engine_server, tiny_model, prompts, perturbed_path, perturbed_model):
    base_model, _ = tiny_model
    assert max_logprob_gap(base_model, perturbed_model, prompts) > 0.1, "the perturbation must change outputs"
    assert any(greedy(base_model, p, N_NEW)[0] != greedy(perturbed_model, p, N_NEW)[0] for p in prompts)

    before = client.weight_version()
    assert_serves(client, base_model, prompts, version=before)  # also fills the prefix cache with old KV

    result = client.update_weights_from_disk(str(perturbed_path), weight_version="7")
    assert result["success"] is True
    assert result["weight_version"] == "7"
    assert client.weight_version() == "7"
    assert httpx.get(engine_server.url + "/health").json()["weight_version"] == "7"
    assert client.model_info()["weight_version"] == "7"

    # the same prompts again: KV cached under the old weights must not be reused
    out = engine_greedy(client, prompts[0])
    assert out["meta_info"]["cached_tokens"] == 0
    assert_serves(client, perturbed_model, prompts, version="7")

    chat = client.chat({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0})
    assert chat["weight_version"] == "7"

    # no version given: the numeric version is bumped
    result = client.update_weights_from_disk(str(perturbed_path))
    assert result["success"] is True and result["weight_version"] == "8"
    assert client.weight_version() == "8"
    assert_serves(client, perturbed_model, prompts[:1], version="8")


def test_update_back_to_base_weights(client, tiny_model, tiny_model_path, prompts):
    base_model, _ = tiny_model
    result = client.update_weights_from_disk(str(tiny_model_path), weight_version="base-again")
    assert result["weight_version"] == "base-again"
    assert_serves(client, base_model, prompts, version="base-again")
    # a non-numeric version is bumped with a suffix rather than failing
    assert client.update_weights_from_disk(str(tiny_model_path))["weight_version"] == "base-again+1"


# --------------------------------------------------------------------------------------------------
# (b) LoRA adapters
# --------------------------------------------------------------------------------------------------


def test_lora_update_applies_to_base_weights(client, tiny_model_path, prompts, tmp_path):
    adapter1 = save_lora(Path(tiny_model_path), tmp_path / "adapter1", seed=1)
    adapter2 = save_lora(Path(tiny_model_path), tmp_path / "adapter2", seed=2)
    merged1 = merged(tiny_model_path, adapter1)
    merged2 = merged(tiny_model_path, adapter2)
    stacked = merged(merged(tiny_model_path, adapter1), adapter2)  # adapter 2 on top of adapter 1
    base = load(tiny_model_path)
    assert max_logprob_gap(base, merged1, prompts) > 0.1, "init_lora_weights=False: the adapter is not a no-op"
    assert max_logprob_gap(merged2, stacked, prompts) > 0.1, "stacking must be distinguishable"

    result = client.update_weights_from_disk(str(adapter1), weight_version="lora-1")
    assert result["success"] is True and result["weight_version"] == "lora-1"
    assert_serves(client, merged1, prompts, version="lora-1")

    result = client.update_weights_from_disk(str(adapter2), weight_version="lora-2")
    assert result["success"] is True
    assert_serves(client, merged2, prompts, version="lora-2")


def test_lora_after_full_weight_update_still_uses_base(client, tiny_model_path, perturbed_path, prompts, tmp_path):
    """An adapter is applied to the served model's base folder, not to whatever full weights came last."""
    client.update_weights_from_disk(str(perturbed_path), weight_version="full")
    adapter = save_lora(Path(tiny_model_path), tmp_path / "adapter", seed=3)
    client.update_weights_from_disk(str(adapter), weight_version="lora-3")
    assert_serves(client, merged(tiny_model_path, adapter), prompts[:2], version="lora-3")


# --------------------------------------------------------------------------------------------------
# (c) swap under concurrent load
# --------------------------------------------------------------------------------------------------


def test_swap_under_concurrent_load(tiny_model_path, tiny_model, perturbed_path, perturbed_model, prompts, tmp_path):
    from slime.engine.launch import EngineProcess

    base_model, _ = tiny_model
    n_new, n_long = 64, 600
    ref = {
        "old": [greedy(base_model, p, n_new)[0] for p in prompts],
        "new": [greedy(perturbed_model, p, n_new)[0] for p in prompts],
    }
    long_ref_old = greedy(base_model, prompts[0], n_long)[0]
    assert ref["old"] != ref["new"]

    results: list[dict] = []
    lock = threading.Lock()

    with EngineProcess(tiny_model_path, log_path=tmp_path / "engine.log", ready_timeout=120) as engine:

        def generate(phase: str, index: int, greedy_: bool, max_new: int):
            sampling = {"max_new_tokens": max_new, "ignore_eos": True}
            sampling.update({"temperature": 0} if greedy_ else {"temperature": 1.0, "seed": 1000 + index})
            record = {"phase": phase, "prompt": index % len(prompts), "greedy": greedy_, "max_new": max_new,
                      "submitted": time.monotonic()}
            try:
                with EngineClient(engine.url, timeout=120.0) as c:
                    record["out"] = c.generate(input_ids=prompts[index % len(prompts)], sampling_params=sampling)
            except Exception as exc:  # counted as a failed request
                record["error"] = repr(exc)
            record["returned"] = time.monotonic()
            with lock:
                results.append(record)

        def start(phase, index, greedy_, max_new=n_new):
            thread = threading.Thread(target=generate, args=(phase, index, greedy_, max_new))
            thread.start()
            return thread

        with EngineClient(engine.url, timeout=120.0) as c:
            old = c.weight_version()
            new = str(int(old) + 1)

            threads = [start("long", 0, True, n_long)]
            assert wait_for(lambda: server_load(engine.url)["running"] >= 1), "long generation never started"
            threads += [start("A", i, greedy_=i % 2 == 0) for i in range(8)]

            update: dict = {}

            def do_update():
                try:
                    update["result"] = c.update_weights_from_disk(str(perturbed_path))
                except Exception as exc:
                    update["error"] = repr(exc)
                update["returned"] = time.monotonic()

            updater = threading.Thread(target=do_update)
            updater.start()
            saw_pending = wait_for(lambda: server_load(engine.url)["swap_pending"] or "returned" in update)
            long_done_when_pending = any(r["phase"] == "long" for r in results)
            threads += [start("B", i, greedy_=i % 2 == 0) for i in range(8)]
            updater.join(timeout=120)
            assert "error" not in update, update
            assert update["result"]["weight_version"] == new
            threads += [start("C", i, greedy_=i % 2 == 0) for i in range(2)]
            for thread in threads:
                thread.join(timeout=120)
            assert c.weight_version() == new
            info = httpx.get(engine.url + "/get_server_info").json()
            assert info["last_error"] is None

    assert saw_pending and not long_done_when_pending, "the update must arrive while generations are in flight"
    assert len(results) == 1 + 8 + 8 + 2
    failed = [r for r in results if "error" in r]
    assert failed == []
    for r in results:
        meta = r["out"]["meta_info"]
        assert meta["finish_reason"]["type"] == "length"
        assert len(r["out"]["output_ids"]) == r["max_new"]
        assert meta["weight_version"] in (old, new)
    versions = {r["phase"]: set() for r in results}
    for r in results:
        versions[r["phase"]].add(r["out"]["meta_info"]["weight_version"])
    assert versions["long"] == {old}  # admitted before the update: finishes on the old weights
    assert versions["B"] == {new}  # queued while the swap was pending: waits for the new weights
    assert versions["C"] == {new}  # submitted after the update returned
    assert all(r["submitted"] > update["returned"] for r in results if r["phase"] == "C")

    long = next(r for r in results if r["phase"] == "long")
    assert long["out"]["output_ids"] == long_ref_old, "a generation mixed old and new weights"
    for r in results:
        if r["greedy"] and r["phase"] != "long":
            tag = "old" if r["out"]["meta_info"]["weight_version"] == old else "new"
            assert r["out"]["output_ids"] == ref[tag][r["prompt"]], (r["phase"], tag)


# --------------------------------------------------------------------------------------------------
# (d) errors and aborts
# --------------------------------------------------------------------------------------------------


def test_nonexistent_path_is_rejected(client, engine_server, prompts):
    before = client.weight_version()
    response = httpx.post(engine_server.url + "/update_weights_from_disk",
                          json={"model_path": "/nonexistent/model", "weight_version": "99"}, timeout=60)
    assert response.status_code == 400
    body = response.json()
    assert body["success"] is False
    assert "/nonexistent/model" in body["message"]
    assert client.weight_version() == before

    with pytest.raises(EngineError) as info:
        client.update_weights_from_disk("/nonexistent/model", weight_version="99")
    assert info.value.status_code == 400
    assert info.value.attempts == 1  # a 400 is final, never retried

    out = engine_greedy(client, prompts[0], n=4)
    assert len(out["output_ids"]) == 4 and out["meta_info"]["weight_version"] == before


def test_differently_shaped_model_is_rejected(client, engine_server, tiny_model_path, prompts, tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(tiny_model_path)
    config.hidden_size = 32
    config.intermediate_size = 96
    torch.manual_seed(0)
    other = AutoModelForCausalLM.from_config(config)
    folder = tmp_path / "narrow"
    other.save_pretrained(folder)
    copy_tokenizer(Path(tiny_model_path), folder)

    before = client.weight_version()
    response = httpx.post(engine_server.url + "/update_weights_from_disk",
                          json={"model_path": str(folder)}, timeout=60)
    assert response.status_code == 400
    body = response.json()
    assert body["success"] is False
    assert "hidden_size" in body["message"]
    assert client.weight_version() == before
    assert len(engine_greedy(client, prompts[0], n=4)["output_ids"]) == 4


def test_abort_all_requests_ends_running_generations(client, engine_server, tiny_model_path, prompts):
    url = engine_server.url
    max_new = 1800
    outcome: dict = {}

    def plain():
        with EngineClient(url, timeout=120.0) as c:
            outcome["plain"] = c.generate(input_ids=prompts[1],
                                          sampling_params={"max_new_tokens": max_new, "ignore_eos": True})
        outcome["plain_returned"] = time.monotonic()

    def streamed():
        with EngineClient(url, timeout=120.0) as c:
            events = list(c.generate_stream(input_ids=prompts[2],
                                            sampling_params={"max_new_tokens": max_new, "ignore_eos": True}))
        outcome["stream"] = events[-1]
        outcome["stream_returned"] = time.monotonic()

    threads = [threading.Thread(target=plain), threading.Thread(target=streamed)]
    for thread in threads:
        thread.start()
    assert wait_for(lambda: server_load(url)["running"] >= 2)
    time.sleep(0.2)
    started = time.monotonic()
    # EngineClient.update_weights_from_disk has no abort flag: raw request
    response = httpx.post(url + "/update_weights_from_disk",
                          json={"model_path": str(tiny_model_path), "weight_version": "after-abort",
                                "abort_all_requests": True}, timeout=60)
    update_took = time.monotonic() - started
    for thread in threads:
        thread.join(timeout=120)

    assert response.status_code == 200, response.text
    assert response.json()["success"] is True and response.json()["weight_version"] == "after-abort"
    assert update_took < 5.0, f"the update waited {update_took:.1f} s instead of aborting"
    for key in ("plain", "stream"):
        meta = outcome[key]["meta_info"]
        assert meta["finish_reason"]["type"] == "abort", (key, meta["finish_reason"])
        assert 0 < meta["completion_tokens"] < max_new
        assert meta["weight_version"] != "after-abort"
        assert outcome[f"{key}_returned"] - started < 5.0

    out = engine_greedy(client, prompts[0], n=4)
    assert out["meta_info"]["weight_version"] == "after-abort"
    assert out["meta_info"]["finish_reason"]["type"] == "length"


def test_folder_without_weights_is_rejected(client, engine_server, tiny_model_path, prompts, tmp_path):
    """config.json but no weight files is "not a model": a 400 like the other bad folders, not a 500."""
    folder = tmp_path / "config-only"
    folder.mkdir()
    shutil.copy2(Path(tiny_model_path) / "config.json", folder / "config.json")
    before = client.weight_version()
    response = httpx.post(engine_server.url + "/update_weights_from_disk",
                          json={"model_path": str(folder)}, timeout=60)
    assert client.weight_version() == before
    assert len(engine_greedy(client, prompts[0], n=4)["output_ids"]) == 4
    assert response.status_code == 400, response.text
    assert response.json()["success"] is False


def test_adapter_for_another_model_is_rejected(client, engine_server, tiny_model_path, prompts, tmp_path):
    """A LoRA adapter trained on a differently shaped model cannot be merged: a 400, not a 500."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(tiny_model_path)
    config.hidden_size = 32
    config.intermediate_size = 96
    torch.manual_seed(0)
    narrow = AutoModelForCausalLM.from_config(config)
    adapter = tmp_path / "narrow-adapter"
    get_peft_model(narrow, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
                   ).save_pretrained(adapter)
    before = client.weight_version()
    response = httpx.post(engine_server.url + "/update_weights_from_disk",
                          json={"model_path": str(adapter)}, timeout=60)
    assert client.weight_version() == before
    assert len(engine_greedy(client, prompts[0], n=4)["output_ids"]) == 4
    assert response.status_code == 400, response.text
    assert response.json()["success"] is False
