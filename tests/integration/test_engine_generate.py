"""/generate against a real engine process, checked against direct forward passes of the same tiny model.

Log-prob semantics under test (SGLang's): a reported log-prob is log_softmax(logits / T) of the
temperature-scaled distribution *before* any truncation; temperature 0 means greedy with log-probs at
T = 1. `input_token_logprobs[i]` belongs to absolute prompt position `logprob_start_len + i` and is the
log-prob of that prompt token given the tokens before it; position 0 has none (null).
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import torch

from slime.engine.launch import EngineProcess

ATOL = 1e-4


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http(engine_server):
    with httpx.Client(base_url=engine_server.url, timeout=120.0) as client:
        yield client


def generate(http: httpx.Client, **body):
    response = http.post("/generate", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def http_decode(ids: list[int]) -> str:
    from slime.models.tiny import build_tiny_model
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(build_tiny_model()).decode(ids, skip_special_tokens=True)


def server_info(http: httpx.Client) -> dict:
    response = http.get("/get_server_info")
    assert response.status_code == 200, response.text
    return response.json()


def reference_logprobs(tiny_model, ids: list[int], temperature: float) -> torch.Tensor:
    """[len(ids), V]: row p is log_softmax(logits_p / T), the distribution of token p + 1."""
    model, _ = tiny_model
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits / temperature, dim=-1)


def prompt_ids(tiny_model, text: str, length: int | None = None) -> list[int]:
    """Token ids of `text`, repeated/cut to exactly `length` tokens when given."""
    _, tokenizer = tiny_model
    ids = tokenizer.encode(text)
    if length is None:
        return ids
    while len(ids) < length:
        ids = ids + ids
    return ids[:length]


def assert_entry(entry, logprob: float, token_id: int, where: str):
    assert isinstance(entry, list) and len(entry) == 3, f"{where}: malformed entry {entry!r}"
    assert entry[1] == token_id, f"{where}: entry is for token {entry[1]}, expected {token_id}"
    assert entry[0] is not None, f"{where}: missing log-prob"
    assert abs(entry[0] - logprob) <= ATOL, f"{where}: engine {entry[0]:.6f} vs direct forward {logprob:.6f}"


def assert_top(row, ref_row: torch.Tensor, k: int, where: str):
    """A top-k row [[lp, id, text], ...] against torch.topk of the reference distribution."""
    values, indices = torch.topk(ref_row, k)
    assert isinstance(row, list) and len(row) == k, f"{where}: expected {k} entries, got {row!r}"
    for j, (entry, value, index) in enumerate(zip(row, values.tolist(), indices.tolist())):
        assert abs(entry[0] - value) <= ATOL, f"{where}[{j}]: {entry[0]:.6f} vs {value:.6f}"
        # ids must agree unless two candidates are numerically tied
        if entry[1] != index:
            assert abs(ref_row[entry[1]].item() - value) <= ATOL, f"{where}[{j}]: id {entry[1]} vs {index}"
        assert abs(ref_row[entry[1]].item() - entry[0]) <= ATOL, f"{where}[{j}]: value does not belong to its id"


def check_output_logprobs(out: dict, ref: torch.Tensor, prompt: list[int], top_k: int = 0, where: str = ""):
    """Every output_token_logprobs entry (and top row) against the reference over prompt + output."""
    meta = out["meta_info"]
    output = out["output_ids"]
    entries = meta["output_token_logprobs"]
    assert len(entries) == len(output) == meta["completion_tokens"]
    for k, (entry, token) in enumerate(zip(entries, output)):
        position = len(prompt) + k - 1  # logits at this position predict output token k
        assert_entry(entry, ref[position, token].item(), token, f"{where}output[{k}]")
    if top_k:
        tops = meta["output_top_logprobs"]
        assert len(tops) == len(output)
        for k, row in enumerate(tops):
            assert_top(row, ref[len(prompt) + k - 1], top_k, f"{where}output_top[{k}]")


def check_input_logprobs(out: dict, ref: torch.Tensor, prompt: list[int], start: int, top_k: int = 0,
                         where: str = ""):
    meta = out["meta_info"]
    entries = meta["input_token_logprobs"]
    assert len(entries) == len(prompt) - start, f"{where}{len(entries)} input entries for start {start}"
    for i, entry in enumerate(entries):
        position = start + i
        if position == 0:
            assert entry[0] is None and entry[1] == prompt[0], f"{where}position 0 must be null: {entry!r}"
            continue
        assert_entry(entry, ref[position - 1, prompt[position]].item(), prompt[position], f"{where}input[{position}]")
    if top_k:
        tops = meta["input_top_logprobs"]
        assert len(tops) == len(entries)
        for i, row in enumerate(tops):
            position = start + i
            if position == 0:
                assert row is None
                continue
            assert_top(row, ref[position - 1], top_k, f"{where}input_top[{position}]")


# --------------------------------------------------------------------------------------------------
# log-prob equality with a direct forward pass
# --------------------------------------------------------------------------------------------------


def test_sampled_output_and_input_logprobs_match_direct_forward(http, tiny_model):
    prompt = prompt_ids(tiny_model, "def parse(self, text):\n    \"\"\"Parse the text and return a tree.")
    out = generate(
        http,
        input_ids=prompt,
        sampling_params={"temperature": 0.7, "max_new_tokens": 12, "seed": 1234, "ignore_eos": True},
        return_logprob=True,
        logprob_start_len=0,
        top_logprobs_num=3,
    )
    assert len(out["output_ids"]) == 12
    ref = reference_logprobs(tiny_model, prompt + out["output_ids"], 0.7)
    check_output_logprobs(out, ref, prompt, top_k=3)
    check_input_logprobs(out, ref, prompt, start=0, top_k=3)
    assert out["meta_info"]["input_token_logprobs"][0] == [None, prompt[0], None]


def test_greedy_reports_temperature_one_logprobs_and_is_deterministic(http, tiny_model):
    prompt = prompt_ids(tiny_model, "import os\nimport sys\n\ndef main():")
    body = dict(input_ids=prompt, sampling_params={"temperature": 0, "max_new_tokens": 8, "ignore_eos": True},
                return_logprob=True, top_logprobs_num=2)
    first, second = generate(http, **body), generate(http, **body)
    assert first["output_ids"] == second["output_ids"]
    assert first["text"] == second["text"]
    ref = reference_logprobs(tiny_model, prompt + first["output_ids"], 1.0)
    for k, token in enumerate(first["output_ids"]):
        assert token == int(ref[len(prompt) + k - 1].argmax()), f"output {k} is not the argmax"
    check_output_logprobs(first, ref, prompt, top_k=2)
    check_output_logprobs(second, ref, prompt, top_k=2)


def test_scoring_a_response_gives_one_logprob_per_response_token(http, engine_client, tiny_model):
    prompt = prompt_ids(tiny_model, "class Stack:\n    def push(self, item):")
    response = prompt_ids(tiny_model, " self.items.append(item)\n        return item")
    R = len(response)
    full = prompt + response
    out = generate(
        http,
        input_ids=full,
        sampling_params={"max_new_tokens": 0, "temperature": 0.6},
        return_logprob=True,
        logprob_start_len=len(full) - R,
        top_logprobs_num=3,
    )
    meta = out["meta_info"]
    assert out["output_ids"] == [] and meta["completion_tokens"] == 0
    assert meta["output_token_logprobs"] == []
    assert meta["finish_reason"]["type"] == "length"
    entries = meta["input_token_logprobs"]
    assert len(entries) == R, f"{len(entries)} entries for a {R}-token response"
    assert [e[1] for e in entries] == response
    ref = reference_logprobs(tiny_model, full, 0.6)
    # entry 0 is the first response token given the whole prompt
    assert_entry(entries[0], ref[len(prompt) - 1, response[0]].item(), response[0], "first response position")
    check_input_logprobs(out, ref, full, start=len(prompt), top_k=3)

    score = engine_client.score(prompt, response, temperature=0.6, top_logprobs_num=3)
    assert len(score.logprobs) == R
    expected = [ref[len(prompt) + i - 1, t].item() for i, t in enumerate(response)]
    assert score.logprobs == pytest.approx(expected, abs=ATOL)
    assert score.weight_version == "0"
    assert len(score.top_logprobs) == R
    for i, row in enumerate(score.top_logprobs):
        values, indices = torch.topk(ref[len(prompt) + i - 1], 3)
        assert [v for v, _ in row] == pytest.approx(values.tolist(), abs=ATOL)


def test_concurrent_requests_in_one_batch_match_their_own_forward(http, tiny_model):
    texts = [
        "a",
        "for i in range(10):",
        "The quick brown fox jumps over the lazy dog.",
        "def __init__(self, name, value=None):\n        self.name = name",
        "raise ValueError('bad value: %r' % (value,))",
        "# Copyright (c) Python Software Foundation.\n# All rights reserved.\n\nimport re\nimport os\nimport sys",
    ]
    prompts = [prompt_ids(tiny_model, t) for t in texts]
    assert len({len(p) for p in prompts}) == len(prompts), "prompts must differ in length"
    before = server_info(http)["stats"]
    barrier = threading.Barrier(len(prompts))
    new_tokens = [10 + 3 * i for i in range(len(prompts))]  # rows leave the batch at different steps

    def body(i):
        return dict(
            input_ids=prompts[i],
            sampling_params={"temperature": 0.7, "max_new_tokens": new_tokens[i], "seed": 100 + i,
                             "ignore_eos": True},
            return_logprob=True,
            logprob_start_len=0,
            top_logprobs_num=3,
        )

    def one(i):
        barrier.wait()
        return generate(http, **body(i))

    with ThreadPoolExecutor(len(prompts)) as pool:
        outs = list(pool.map(one, range(len(prompts))))
    after = server_info(http)["stats"]
    # they really shared decode steps: fewer steps than tokens decoded one sequence at a time
    decoded = sum(n - 1 for n in new_tokens)
    assert after["decode_steps"] - before["decode_steps"] < decoded

    for i, (prompt, out) in enumerate(zip(prompts, outs)):
        assert len(out["output_ids"]) == new_tokens[i]
        ref = reference_logprobs(tiny_model, prompt + out["output_ids"], 0.7)
        check_output_logprobs(out, ref, prompt, top_k=3, where=f"request {i}: ")
        check_input_logprobs(out, ref, prompt, start=0, top_k=3, where=f"request {i}: ")

    # a seeded request samples the same tokens alone as it did inside the batch
    alone = generate(http, **body(3))
    assert alone["output_ids"] == outs[3]["output_ids"]


def test_requests_joining_a_running_batch_match_their_own_forward(http, tiny_model):
    """A long request is decoding when others join (left-padded into its batch) and leave again."""
    long_prompt = prompt_ids(tiny_model, "A long generation that others join while it decodes.")
    joiners = [prompt_ids(tiny_model, t) for t in ("x", "for key, value in items.items():", "Hello there, friend")]
    results: dict[int, dict] = {}

    def run(i, prompt, n):
        results[i] = generate(http, input_ids=prompt, return_logprob=True, logprob_start_len=0,
                              sampling_params={"temperature": 0.7, "seed": 500 + i, "max_new_tokens": n,
                                               "ignore_eos": True})

    first = threading.Thread(target=run, args=(0, long_prompt, 120))
    first.start()
    deadline = time.monotonic() + 10
    while server_info(http)["load"]["running"] == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    others = [threading.Thread(target=run, args=(i + 1, p, 5 + 4 * i)) for i, p in enumerate(joiners)]
    for t in others:
        t.start()
        time.sleep(0.01)
    for t in [first, *others]:
        t.join()
    for i, prompt in enumerate([long_prompt, *joiners]):
        out = results[i]
        ref = reference_logprobs(tiny_model, prompt + out["output_ids"], 0.7)
        check_output_logprobs(out, ref, prompt, where=f"request {i}: ")
        check_input_logprobs(out, ref, prompt, start=0, where=f"request {i}: ")


def test_truncated_sampling_reports_untruncated_logprobs(http, tiny_model):
    """top-k/top-p/min-p only decide what may be drawn; reported log-probs are of the full scaled distribution."""
    prompt = prompt_ids(tiny_model, "Truncation: the reported log-probs ignore top-k and top-p.")
    for i, truncation in enumerate([{"top_k": 2}, {"top_p": 0.5}, {"min_p": 0.2}, {"top_k": 3, "top_p": 0.9}]):
        out = generate(http, input_ids=prompt, return_logprob=True, top_logprobs_num=3,
                       sampling_params={"temperature": 1.8, "seed": 77 + i, "max_new_tokens": 10,
                                        "ignore_eos": True, **truncation})
        ref = reference_logprobs(tiny_model, prompt + out["output_ids"], 1.8)
        check_output_logprobs(out, ref, prompt, top_k=3, where=f"{truncation}: ")
        for k, token in enumerate(out["output_ids"]):
            row = ref[len(prompt) + k - 1]
            if "top_k" in truncation:
                kth = torch.topk(row, truncation["top_k"]).values[-1]
                assert row[token] >= kth - ATOL, f"{truncation}: output {k} is outside the top-k"
            if "min_p" in truncation:
                assert row[token].exp() >= truncation["min_p"] * row.max().exp() - ATOL
            if "top_p" in truncation:
                mass_before = row.exp()[row > row[token] + ATOL].sum()
                assert mass_before < truncation["top_p"] + ATOL, f"{truncation}: output {k} is outside the nucleus"


@pytest.fixture(scope="module")
def chunked_engine(tiny_model_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("engine-chunked") / "engine.log"
    with EngineProcess(tiny_model_path, "--chunked-prefill-size", "16", log_path=log, ready_timeout=120) as server:
        yield server


def test_prompt_longer_than_prefill_chunk(chunked_engine, tiny_model):
    prompts = [
        prompt_ids(tiny_model, "def read(path):\n    with open(path) as f:\n        return f.read()\n", 60),
        prompt_ids(tiny_model, "Return a new list containing all items from the iterable in order.", 53),
    ]
    with httpx.Client(base_url=chunked_engine.url, timeout=120.0) as http:
        # whole prompt scored plus sampled output, two long prompts prefilling/decoding side by side
        def one(i):
            return generate(
                http,
                input_ids=prompts[i],
                sampling_params={"temperature": 0.7, "max_new_tokens": 6, "seed": 7 + i, "ignore_eos": True},
                return_logprob=True,
                logprob_start_len=0,
                top_logprobs_num=3,
            )

        with ThreadPoolExecutor(2) as pool:
            outs = list(pool.map(one, range(2)))
        for i, (prompt, out) in enumerate(zip(prompts, outs)):
            ref = reference_logprobs(tiny_model, prompt + out["output_ids"], 0.7)
            check_input_logprobs(out, ref, prompt, start=0, top_k=3, where=f"prompt {i}: ")
            check_output_logprobs(out, ref, prompt, top_k=3, where=f"prompt {i}: ")

        # scoring from inside a chunk (positions 23.. with chunks of 16)
        full = prompts[0]
        out = generate(http, input_ids=full, sampling_params={"max_new_tokens": 0, "temperature": 0.6},
                       return_logprob=True, logprob_start_len=23, top_logprobs_num=2)
        ref = reference_logprobs(tiny_model, full, 0.6)
        check_input_logprobs(out, ref, full, start=23, top_k=2)


# --------------------------------------------------------------------------------------------------
# prefix cache
# --------------------------------------------------------------------------------------------------


def test_prefix_cache_reuses_prompt_and_keeps_results(http, tiny_model):
    prompt = prompt_ids(tiny_model, "Prefix cache test: the same long prompt is sent twice to the engine. ", 48)
    body = dict(input_ids=prompt, sampling_params={"temperature": 0, "max_new_tokens": 6, "ignore_eos": True},
                return_logprob=True, top_logprobs_num=2)
    first = generate(http, **body)
    second = generate(http, **body)
    assert first["meta_info"]["cached_tokens"] == 0
    assert second["meta_info"]["cached_tokens"] > 0
    assert second["output_ids"] == first["output_ids"]
    assert second["text"] == first["text"]
    for a, b in zip(first["meta_info"]["output_token_logprobs"], second["meta_info"]["output_token_logprobs"]):
        assert a[1] == b[1] and abs(a[0] - b[0]) <= ATOL
    ref = reference_logprobs(tiny_model, prompt + first["output_ids"], 1.0)
    check_output_logprobs(second, ref, prompt, top_k=2)

    # input log-probs on a cached prompt: positions that need logits are recomputed
    start = len(prompt) - 5
    third = generate(http, input_ids=prompt, sampling_params={"temperature": 0, "max_new_tokens": 2},
                     return_logprob=True, logprob_start_len=start, top_logprobs_num=2)
    assert 0 < third["meta_info"]["cached_tokens"] <= start
    ref = reference_logprobs(tiny_model, prompt + third["output_ids"], 1.0)
    check_input_logprobs(third, ref, prompt, start=start, top_k=2)
    check_output_logprobs(third, ref, prompt, top_k=2)

    whole = generate(http, input_ids=prompt, sampling_params={"temperature": 0, "max_new_tokens": 1},
                     return_logprob=True, logprob_start_len=0)
    check_input_logprobs(whole, ref, prompt, start=0)

    # a follow-up turn (prompt + response + more) reuses KV written during decoding
    follow = prompt + first["output_ids"] + prompt_ids(tiny_model, " And then?")
    out = generate(http, input_ids=follow,
                   sampling_params={"temperature": 0.7, "max_new_tokens": 5, "seed": 3, "ignore_eos": True},
                   return_logprob=True, logprob_start_len=len(follow) - 4)
    assert out["meta_info"]["cached_tokens"] > len(prompt)
    ref = reference_logprobs(tiny_model, follow + out["output_ids"], 0.7)
    check_output_logprobs(out, ref, follow)
    check_input_logprobs(out, ref, follow, start=len(follow) - 4)


# --------------------------------------------------------------------------------------------------
# inputs and outputs
# --------------------------------------------------------------------------------------------------

GREEDY = {"temperature": 0, "max_new_tokens": 6, "ignore_eos": True}


def test_text_and_input_ids_give_the_same_result(http, tiny_model):
    text = "while True:\n    line = input()"
    by_text = generate(http, text=text, sampling_params=GREEDY)
    by_ids = generate(http, input_ids=prompt_ids(tiny_model, text), sampling_params=GREEDY)
    assert by_text["output_ids"] == by_ids["output_ids"]
    assert by_text["text"] == by_ids["text"]
    assert by_text["meta_info"]["prompt_tokens"] == by_ids["meta_info"]["prompt_tokens"] == len(
        prompt_ids(tiny_model, text))


def test_batch_of_prompts_returns_a_list_in_order(http, tiny_model):
    texts = ["x = 1", "print('hello world')", "return None"]
    singles = [generate(http, text=t, sampling_params=GREEDY) for t in texts]
    batch = generate(http, text=texts, sampling_params=GREEDY)
    assert isinstance(batch, list) and len(batch) == 3
    assert [b["output_ids"] for b in batch] == [s["output_ids"] for s in singles]
    assert [b["meta_info"]["prompt_tokens"] for b in batch] == [len(prompt_ids(tiny_model, t)) for t in texts]
    ids_batch = generate(http, input_ids=[prompt_ids(tiny_model, t) for t in texts], sampling_params=GREEDY)
    assert [b["output_ids"] for b in ids_batch] == [s["output_ids"] for s in singles]


def test_n_samples_are_seeded_and_differ(http):
    body = dict(text="Once upon a time", sampling_params={"temperature": 1.5, "max_new_tokens": 16, "n": 3,
                                                            "seed": 42, "ignore_eos": True})
    first = generate(http, **body)
    assert isinstance(first, list) and len(first) == 3
    again = generate(http, **body)
    assert [o["output_ids"] for o in again] == [o["output_ids"] for o in first]
    assert [o["text"] for o in again] == [o["text"] for o in first]
    assert len({tuple(o["output_ids"]) for o in first}) > 1, "the 3 samples are all identical"
    other = generate(http, **{**body, "sampling_params": {**body["sampling_params"], "seed": 43}})
    assert [o["output_ids"] for o in other] != [o["output_ids"] for o in first]


# --------------------------------------------------------------------------------------------------
# finish reasons
# --------------------------------------------------------------------------------------------------

# The tiny model strongly predicts its last input token again; a prompt ending in <|im_end|> (the EOS)
# therefore makes greedy decoding emit EOS straight away.


def eos_prompt(tiny_model) -> list[int]:
    _, tokenizer = tiny_model
    return prompt_ids(tiny_model, "hello world") + [tokenizer.eos_token_id]


def test_finish_length(http):
    out = generate(http, text="length test", sampling_params={"max_new_tokens": 5, "ignore_eos": True})
    assert out["meta_info"]["finish_reason"] == {"type": "length", "length": 5}
    assert len(out["output_ids"]) == out["meta_info"]["completion_tokens"] == 5


def test_finish_on_stop_token_ids(http):
    sampling = {"temperature": 1.5, "seed": 5, "max_new_tokens": 20, "ignore_eos": True}
    ref = generate(http, text="stop token test", sampling_params=sampling)["output_ids"]
    stop_token = ref[4]
    stop_at = ref.index(stop_token)
    out = generate(http, text="stop token test", sampling_params={**sampling, "stop_token_ids": [stop_token]})
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop_token}
    assert out["output_ids"] == ref[: stop_at + 1]
    # the stop token stays in output_ids (it was sampled) but its text is not part of the answer ...
    expected = http_decode(out["output_ids"][:-1])
    assert out["text"] == expected
    # ... unless no_stop_trim asks to keep it
    kept = generate(http, text="stop token test",
                    sampling_params={**sampling, "stop_token_ids": [stop_token], "no_stop_trim": True})
    assert kept["text"] == http_decode(kept["output_ids"])


def test_rid_is_echoed_as_meta_info_id(http):
    out = generate(http, text="rid test", rid="my-request-1", sampling_params={"max_new_tokens": 2})
    assert out["meta_info"]["id"] == "my-request-1"
    batch = generate(http, text=["a", "b"], rid=["r-a", "r-b"], sampling_params={"max_new_tokens": 2})
    assert [o["meta_info"]["id"] for o in batch] == ["r-a", "r-b"]
    bad = http.post("/generate", json={"text": ["a", "b"], "rid": ["only-one"]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "rid"


def test_finish_on_stop_string_trims_unless_no_stop_trim(http, tiny_model):
    sampling = {"temperature": 1.5, "seed": 11, "max_new_tokens": 30, "ignore_eos": True}
    ref = generate(http, text="Stop strings:", sampling_params=sampling)
    _, tokenizer = tiny_model
    # a stop string that first appears in the middle of the output
    stop = None
    for k in range(4, 20):
        candidate = tokenizer.decode([ref["output_ids"][k]]).strip()
        if len(candidate) >= 2 and ref["text"].find(candidate) > 0:
            stop = candidate
            break
    assert stop is not None, f"no usable stop string in {ref['text']!r}"
    index = ref["text"].find(stop)

    out = generate(http, text="Stop strings:", sampling_params={**sampling, "stop": [stop, "never-generated-xyz"]})
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    assert out["text"] == ref["text"][:index]
    assert len(out["output_ids"]) < 30
    assert out["output_ids"] == ref["output_ids"][: len(out["output_ids"])]

    kept = generate(http, text="Stop strings:", sampling_params={**sampling, "stop": stop, "no_stop_trim": True})
    assert kept["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    assert kept["text"] == ref["text"][: index + len(stop)]


def test_eos_stops_unless_ignore_eos(http, tiny_model):
    _, tokenizer = tiny_model
    prompt = eos_prompt(tiny_model)
    out = generate(http, input_ids=prompt, sampling_params={"temperature": 0, "max_new_tokens": 8})
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": tokenizer.eos_token_id}
    assert out["output_ids"] == [tokenizer.eos_token_id]
    assert out["text"] == ""  # special tokens are skipped in text

    ignored = generate(http, input_ids=prompt, sampling_params={"temperature": 0, "max_new_tokens": 8,
                                                                "ignore_eos": True})
    assert ignored["meta_info"]["finish_reason"] == {"type": "length", "length": 8}
    assert len(ignored["output_ids"]) == 8
    assert ignored["output_ids"][0] == tokenizer.eos_token_id

    kept = generate(http, input_ids=prompt, sampling_params={"temperature": 0, "max_new_tokens": 3,
                                                             "ignore_eos": True, "skip_special_tokens": False})
    assert kept["text"] == tokenizer.eos_token * 3


def test_min_new_tokens_defers_eos_and_stop_tokens(http, tiny_model):
    _, tokenizer = tiny_model
    eos = tokenizer.eos_token_id
    out = generate(http, input_ids=eos_prompt(tiny_model),
                   sampling_params={"temperature": 0, "max_new_tokens": 20, "min_new_tokens": 5})
    assert out["output_ids"] == [eos] * 5
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": eos}

    ids = prompt_ids(tiny_model, "again and again")
    repeated = generate(http, input_ids=ids, sampling_params=GREEDY)["output_ids"]
    out = generate(http, input_ids=ids, sampling_params={**GREEDY, "max_new_tokens": 20, "min_new_tokens": 3,
                                                         "stop_token_ids": [repeated[0]]})
    assert out["meta_info"]["completion_tokens"] >= 3
    assert out["meta_info"]["finish_reason"]["type"] == "stop"


# --------------------------------------------------------------------------------------------------
# response shape
# --------------------------------------------------------------------------------------------------


def test_meta_info_fields(http, tiny_model):
    prompt = prompt_ids(tiny_model, "meta info fields")
    a = generate(http, input_ids=prompt, sampling_params={"max_new_tokens": 4, "ignore_eos": True})
    b = generate(http, input_ids=prompt, sampling_params={"max_new_tokens": 4, "ignore_eos": True})
    meta = a["meta_info"]
    assert isinstance(meta["id"], str) and meta["id"]
    assert meta["id"] != b["meta_info"]["id"]
    assert meta["prompt_tokens"] == len(prompt)
    assert meta["completion_tokens"] == len(a["output_ids"]) == 4
    assert meta["cached_tokens"] == 0  # shorter than the prefix cache's minimum
    assert meta["weight_version"] == "0"
    assert meta["finish_reason"] == {"type": "length", "length": 4}
    assert "output_token_logprobs" not in meta  # only with return_logprob
    _, tokenizer = tiny_model
    assert a["text"] == tokenizer.decode(a["output_ids"], skip_special_tokens=True)


def test_return_text_in_logprobs(http, tiny_model):
    _, tokenizer = tiny_model
    prompt = prompt_ids(tiny_model, "text in log-probs")
    out = generate(http, input_ids=prompt, sampling_params={"temperature": 1.2, "seed": 9, "max_new_tokens": 5},
                   return_logprob=True, return_text_in_logprobs=True, logprob_start_len=0, top_logprobs_num=2)
    meta = out["meta_info"]
    for entry in meta["output_token_logprobs"] + meta["input_token_logprobs"]:
        assert entry[2] == tokenizer.decode([entry[1]])
    for row in meta["output_top_logprobs"] + meta["input_top_logprobs"][1:]:
        for entry in row:
            assert entry[2] == tokenizer.decode([entry[1]])
    assert meta["input_token_logprobs"][0] == [None, prompt[0], tokenizer.decode([prompt[0]])]

    plain = generate(http, input_ids=prompt, sampling_params={"temperature": 1.2, "seed": 9, "max_new_tokens": 5},
                     return_logprob=True, top_logprobs_num=1)
    assert all(entry[2] is None for entry in plain["meta_info"]["output_token_logprobs"])
    assert all(row[0][2] is None for row in plain["meta_info"]["output_top_logprobs"])


def read_sse(response: httpx.Response) -> tuple[list[dict], bool]:
    events, done = [], False
    for line in response.iter_lines():
        if not line:
            continue
        assert line.startswith("data: "), line
        payload = line[len("data: "):]
        if payload == "[DONE]":
            done = True
            continue
        assert not done, "event after [DONE]"
        events.append(json.loads(payload))
    return events, done


def test_streaming_generate(http):
    sampling = {"temperature": 0, "max_new_tokens": 12, "ignore_eos": True}
    text = "Streaming: def stream(self):"
    reference = generate(http, text=text, sampling_params=sampling)
    with http.stream("POST", "/generate", json={"text": text, "sampling_params": sampling, "stream": True,
                                                "return_logprob": True}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events, done = read_sse(response)
    assert done, "stream did not end with data: [DONE]"
    assert len(events) >= 2
    for earlier, later in zip(events, events[1:]):
        assert later["text"].startswith(earlier["text"])
        assert later["output_ids"][: len(earlier["output_ids"])] == earlier["output_ids"]
    assert all(e["meta_info"]["finish_reason"] is None for e in events[:-1] if len(e["output_ids"]) < 12)
    last = events[-1]
    assert last["meta_info"]["finish_reason"] == {"type": "length", "length": 12}
    assert last["text"] == reference["text"]
    assert last["output_ids"] == reference["output_ids"]
    assert len(last["meta_info"]["output_token_logprobs"]) == 12


def test_streaming_never_sends_text_a_stop_string_trims(http):
    sampling = {"temperature": 1.5, "seed": 11, "max_new_tokens": 30, "ignore_eos": True}
    full = generate(http, text="Stop strings:", sampling_params=sampling)["text"]
    stop = full[len(full) // 2: len(full) // 2 + 3]
    assert stop.strip(), full
    expected = full[: full.find(stop)]
    with http.stream("POST", "/generate", json={"text": "Stop strings:", "stream": True,
                                                "sampling_params": {**sampling, "stop": stop}}) as response:
        events, done = read_sse(response)
    assert done
    for event in events:
        assert expected.startswith(event["text"]), f"streamed {event['text']!r}, final {expected!r}"
    assert events[-1]["text"] == expected
    assert events[-1]["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}


def test_streaming_n_samples_carry_their_index(http):
    sampling = {"temperature": 1.5, "seed": 21, "max_new_tokens": 8, "n": 2, "ignore_eos": True}
    reference = generate(http, text="two streams", sampling_params=sampling)
    with http.stream("POST", "/generate", json={"text": "two streams", "stream": True,
                                                "sampling_params": sampling}) as response:
        events, done = read_sse(response)
    assert done
    assert {e["index"] for e in events} == {0, 1}
    for index in (0, 1):
        mine = [e for e in events if e["index"] == index]
        assert mine[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 8}
        assert mine[-1]["output_ids"] == reference[index]["output_ids"]
        assert mine[-1]["text"] == reference[index]["text"]
