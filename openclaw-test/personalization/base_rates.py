"""Each persona's base rates and eligibility: how often the untrained model pleases the persona untold, and
told (the hints our rules hint judge writes from the persona's corrections, or the persona's own statement),
the way the OPD teacher sees a hint.

    python -m personalization.base_rates --url http://127.0.0.1:30010 [--personas student,concise]
        [--num-prompts 36] [--samples 2] [--told judge] [--out eligibility.json]

Works against the engine itself or the conversation server (requests are side turns, never trained on). A
preference the model meets sometimes gives Binary RL a signal; one it meets only when told gives only the hint
(OPD) a signal; one it does not follow even when told is out of reach of talking. A persona is *eligible*
(`report.ELIGIBLE_GAP`, `report.ELIGIBLE_QUALITY_DROP`) when told it is pleased at least 0.3 more often than
untold with quality kept within 0.05: what talking can be expected to teach.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from personalization.client import ServerClient
from personalization.personas import PERSONAS, get_persona
from personalization.problems import load_problems
from personalization.report import eligibility_verdict
from personalization.simulate import Generation, evaluate, told_hints

__all__ = ["measure_base_rates"]


async def measure_base_rates(url: str, personas: list[str], num_prompts: int, samples: int,
                             generation: Generation, api_key: str | None = None, seed: int = 1234,
                             told: str = "judge", split: str = "heldout") -> dict:
    client = ServerClient(url, api_key=api_key)
    try:
        client.model = await client.served_model()
        problems = load_problems(split)[:num_prompts]
        rates = {}
        for name in personas:
            persona = get_persona(name)
            hints = told_hints(persona, told)
            row = {"versions": persona.versions, "preference_kind": persona.preference_kind, "told": told,
                   "hints": hints, "split": split, "seed": seed, "samples": samples}
            for key, with_hints in (("without_hint", None), ("with_hint", hints)):
                result = await evaluate(client, persona, problems, hints=with_hints, samples_per_prompt=samples,
                                        generation=generation, seed=seed)
                row[key] = result.summary()
            row.update(eligibility_verdict(row["without_hint"], row["with_hint"]))
            rates[name] = row
            u, t = row["without_hint"], row["with_hint"]
            print(f"{name:10s} pleased {u['pleased']:.3f} -> {t['pleased']:.3f} told (gap {row['gap']:+.3f}); "
                  f"preference {u['preference']:.3f} -> {t['preference']:.3f}; quality {u['quality']:.3f} -> "
                  f"{t['quality']:.3f}; n={u['n']}; {'eligible' if row['eligible'] else 'not eligible'}"
                  f"{', hint-only' if row['hint_only'] else ''}", flush=True)
        return rates
    finally:
        await client.aclose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="an OpenAI-compatible server (engine or conversation proxy)")
    parser.add_argument("--personas", default=",".join(PERSONAS))
    parser.add_argument("--num-prompts", type=int, default=36)
    parser.add_argument("--samples", type=int, default=2, help="samples per prompt")
    parser.add_argument("--split", default="heldout", choices=["heldout", "ood", "train"])
    parser.add_argument("--told", default="judge", choices=["judge", "persona"],
                        help="the told hints: the rules judge's from the corrections, or the persona's own")
    parser.add_argument("--seed", type=int, default=1234, help="sampling seeds: seed + 1000 * sample + problem")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--out", default=None, help="write the rates as JSON here")
    args = parser.parse_args(argv)
    rates = asyncio.run(measure_base_rates(args.url, args.personas.split(","), args.num_prompts, args.samples,
                                           Generation(max_tokens=args.max_tokens, temperature=args.temperature),
                                           api_key=args.api_key, seed=args.seed, told=args.told, split=args.split))
    if args.out:
        Path(args.out).write_text(json.dumps(rates, indent=1) + "\n")


if __name__ == "__main__":
    main()
