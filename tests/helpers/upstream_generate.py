"""A generate function written the way OpenClaw-RL's method folders write theirs (upstream's imports, its
`GenerateState`, the router address on `args`, `post`, `update_from_meta_info(args, meta_info)`, its extra `Sample`
fields), written here from those interfaces, for the port test (tests/integration/test_upstream_port.py)."""

import os
import time

from slime.rollout.sglang_rollout import GenerateState
from slime.utils.http_utils import post
from slime.utils.types import Sample


async def generate(args, sample: Sample, sampling_params) -> Sample:
    started = time.time()
    state = GenerateState(args)
    url = f"http://{args.sglang_router_ip}:{args.sglang_router_port}/generate"
    prompt_ids = state.tokenizer.encode(sample.prompt, add_special_tokens=False)
    payload = {"input_ids": prompt_ids, "sampling_params": sampling_params, "return_logprob": True}
    output = await post(url, payload)
    entries = output["meta_info"]["output_token_logprobs"]
    sample.tokens = prompt_ids + [entry[1] for entry in entries]
    sample.rollout_log_probs = [entry[0] for entry in entries]
    sample.response = output["text"]
    sample.response_length = len(entries)
    sample.loss_mask = [1] * len(entries)
    sample.update_from_meta_info(args, output["meta_info"])
    sample.session_id = f"group-{sample.group_index}"
    sample.non_generation_time = time.time() - started
    with open(os.environ["UPSTREAM_GENERATE_LOG"], "a") as out:
        out.write(f"{args.sglang_router_ip}:{args.sglang_router_port} {sample.status.value} "
                  f"{sample.prefix_cache_info.total_prompt_tokens}\n")
    return sample
