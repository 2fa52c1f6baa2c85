"""Each persona's base rate: how often the untrained model meets the hidden preference, without and with the
preference stated in the prompt (the way the OPD teacher sees a hint).

    python -m slime.personalization.base_rates --url http://127.0.0.1:30010 [--personas student,concise]
        [--num-prompts 36] [--samples 1] [--out base_rates.json]

Works against the engine itself or the conversation server (requests are side turns, never trained on). A
preference the model meets sometimes gives Binary RL a signal; one it meets only when told gives only the
hint (OPD) a signal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from slime.personalization.client import ServerClient
from slime.personalization.personas import PERSONAS, get_persona
from slime.personalization.problems import load_problems
from slime.personalization.simulate import Generation, evaluate

__all__ = ["measure_base_rates"]


async def measure_base_rates(url: str, personas: list[str], num_prompts: int, samples: int,
                             generation: Generation, api_key: str | None = None, seed: int = 1234) -> dict:
    client = ServerClient(url, api_key=api_key)
    try:
        client.model = await client.served_model()
        heldout = load_problems("heldout")[:num_prompts]
        rates = {}
        for name in personas:
            persona = get_persona(name)
            row = {"versions": persona.versions, "preference_kind": persona.preference_kind}
            for with_hint in (False, True):
                result = await evaluate(client, persona, heldout, with_hint=with_hint, samples_per_prompt=samples,
                                        generation=generation, seed=seed)
                row["with_hint" if with_hint else "without_hint"] = result.summary()
            rates[name] = row
            print(f"{name:10s} preference {row['without_hint']['preference']:.3f} -> "
                  f"{row['with_hint']['preference']:.3f} with the hint; quality {row['without_hint']['quality']:.3f}"
                  f" -> {row['with_hint']['quality']:.3f} (n={row['without_hint']['n']})", flush=True)
        return rates
    finally:
        await client.aclose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="an OpenAI-compatible server (engine or conversation proxy)")
    parser.add_argument("--personas", default=",".join(PERSONAS))
    parser.add_argument("--num-prompts", type=int, default=36)
    parser.add_argument("--samples", type=int, default=1, help="samples per prompt")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--out", default=None, help="write the rates as JSON here")
    args = parser.parse_args(argv)
    rates = asyncio.run(measure_base_rates(args.url, args.personas.split(","), args.num_prompts, args.samples,
                                           Generation(max_tokens=args.max_tokens, temperature=args.temperature),
                                           api_key=args.api_key))
    if args.out:
        Path(args.out).write_text(json.dumps(rates, indent=1) + "\n")


if __name__ == "__main__":
    main()
