"""Learning-curve plots and the results table, from the runner's `result.json` files.

`python -m slime.personalization.report <results dir> [--out table.md]` finds every result.json below the
directory and prints the markdown table of openclaw-test/README.md: per persona and method, held-out preference
and quality at each checkpoint (mean +- std over seeds), the gain at 64 interactions, and the wall time; and,
for the hint-only personas (never pleased unprompted, often when told), every method's preference side by side.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from slime.conversation.methods.builtin import Combine
from slime.personalization.personas import MET

__all__ = ["collect", "headline", "hint_only_personas", "load_results", "markdown_table", "method_label",
           "plot_curve", "preference_at", "training_replies", "training_replies_table"]

# A persona is "hint-only" when the base model (almost) never pleases it unprompted but often does when told:
# Binary RL then sees only failures, and only the hint (OPD) says what to do instead.
HINT_ONLY_BASE_BELOW = 0.1
HINT_ONLY_TOLD_AT_LEAST = 0.3


def plot_curve(result: dict, path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = result.get("curve") or []
    xs = [p["interactions"] for p in curve]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, [p["preference"] for p in curve], "o-", label="preference (held out)")
    ax.plot(xs, [p["quality"] for p in curve], "s--", label="quality (held out)")
    hinted = result.get("base_with_hint")
    if hinted:
        ax.axhline(hinted["preference"], color="gray", linestyle=":", label="base model told the preference")
    ax.set_xlabel("interactions")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"{result.get('persona')} / {result.get('method')} / {result.get('model')} / seed {result.get('seed')}")
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def load_results(root: str | Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(Path(root).rglob("result.json"))]


def _stat(values: list[float]) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f}±{statistics.stdev(values):.2f}"


def method_label(result: dict) -> str:
    """The method, with the run's `variant` tag (e.g. an LR probe) so variants never merge with the default."""
    return f"{result['method']} [{result['variant']}]" if result.get("variant") else result["method"]


def collect(results: Iterable[dict]) -> dict:
    """{(persona, method): {"points": {n: {"preference": [...], "quality": [...], "wall": [...]}},
    "hint": [...], "seeds": [...]}}."""
    table: dict = defaultdict(lambda: {"points": defaultdict(lambda: defaultdict(list)), "hint": [], "seeds": []})
    for r in results:
        row = table[(r["persona"], method_label(r))]
        row["seeds"].append(r["seed"])
        if r.get("base_with_hint"):
            row["hint"].append(r["base_with_hint"]["preference"])
        for p in r.get("curve", []):
            cell = row["points"][p["interactions"]]
            cell["preference"].append(p["preference"])
            cell["quality"].append(p["quality"])
            cell["wall"].append(p.get("wall_seconds", 0.0))
    return table


def markdown_table(results: list[dict], checkpoints: tuple[int, ...] = (0, 32, 64, 128)) -> str:
    table = collect(results)
    head = ["persona", "method", "seeds", "base told pref."] + [f"pref@{n}" for n in checkpoints] + \
           [f"qual@{n}" for n in checkpoints] + ["wall min @64", "wall min @128"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (persona, method), row in sorted(table.items()):
        points = row["points"]
        cells = [persona, method, str(len(row["seeds"])), _stat(row["hint"])]
        cells += [_stat(points[n]["preference"]) if n in points else "–" for n in checkpoints]
        cells += [_stat(points[n]["quality"]) if n in points else "–" for n in checkpoints]
        for n in (64, 128):
            cells.append(_stat([w / 60 for w in points[n]["wall"]]) if n in points else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def headline(results: list[dict], method: str = Combine.name, at: int = 64) -> dict:
    """Mean over personas (each averaged over its seeds) of the preference and quality change from 0 to `at`
    interactions, for one method."""
    table = collect(r for r in results if method_label(r) == method)
    gains, quality_changes = [], []
    for (_, _), row in table.items():
        points = row["points"]
        if 0 in points and at in points:
            gains.append(statistics.mean(points[at]["preference"]) - statistics.mean(points[0]["preference"]))
            quality_changes.append(statistics.mean(points[at]["quality"]) - statistics.mean(points[0]["quality"]))
    if not gains:
        return {"personas": 0, "preference_gain": float("nan"), "quality_change": float("nan")}
    return {"personas": len(gains), "preference_gain": statistics.mean(gains),
            "quality_change": statistics.mean(quality_changes)}


def hint_only_personas(results: list[dict]) -> list[str]:
    """Personas whose mean held-out preference at 0 interactions is below `HINT_ONLY_BASE_BELOW` while the base
    model told the preference reaches `HINT_ONLY_TOLD_AT_LEAST` (both measured by every run of the persona)."""
    base: dict = defaultdict(list)
    told: dict = defaultdict(list)
    for r in results:
        base[r["persona"]] += [p["preference"] for p in r.get("curve", []) if p["interactions"] == 0]
        if r.get("base_with_hint"):
            told[r["persona"]].append(r["base_with_hint"]["preference"])
    return sorted(p for p in base if base[p] and told[p] and statistics.mean(base[p]) < HINT_ONLY_BASE_BELOW
                  and statistics.mean(told[p]) >= HINT_ONLY_TOLD_AT_LEAST)


def preference_at(results: list[dict], persona: str, at: int) -> dict[str, float]:
    """{method label: mean held-out preference after `at` interactions over its seeds} for one persona."""
    return {method: statistics.mean(row["points"][at]["preference"])
            for (name, method), row in sorted(collect(results).items()) if name == persona and at in row["points"]}


def training_replies(interactions: Iterable[dict], met: float = MET) -> dict:
    """How a run's training replies (one per interaction) met the preference.

    "answered" is quality > 0 (non-empty and on topic). Binary RL can reinforce only replies that please, i.e.
    meet the preference *and* answer; a model that meets a preference only by dropping the task (a greeting and
    nothing else) gives it nothing to reinforce, however often it meets the preference.
    """
    rows = list(interactions)
    hits = [r for r in rows if r["preference"] >= met]
    return {"n": len(rows), "met": len(hits), "met_and_answered": sum(1 for r in hits if r["quality"] > 0),
            "met_first_attempt": sum(1 for r in hits if r.get("turn", 1) == 1)}


def training_replies_table(results: list[dict]) -> str:
    """Per persona and method, the training replies summed over the runs that recorded them."""
    sums: dict = defaultdict(lambda: defaultdict(int))
    for r in results:
        if r.get("training_replies"):
            cell = sums[(r["persona"], method_label(r))]
            cell["runs"] += 1
            for key, value in r["training_replies"].items():
                cell[key] += value
    if not sums:
        return ""
    lines = ["| persona | method | runs | training replies | met the preference | of those, answered "
             "| of those, at the first attempt |", "|---|---|---|---|---|---|---|"]
    for (persona, method), c in sorted(sums.items()):
        lines.append(f"| {persona} | {method} | {c['runs']} | {c['n']} | {c['met']} | {c['met_and_answered']} "
                     f"| {c['met_first_attempt']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", help="directory searched for result.json files")
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args(argv)
    results = load_results(args.root)
    if not results:
        raise SystemExit(f"no result.json under {args.root}")
    text = markdown_table(results)
    for method in sorted({method_label(r) for r in results}):
        for at in (64, 128):
            h = headline(results, method, at)
            if h["personas"]:
                text += (f"\n\n{method}: mean preference gain at {at} = {h['preference_gain']:+.3f}, "
                         f"quality change {h['quality_change']:+.3f} over {h['personas']} persona(s)")
    for persona in hint_only_personas(results):
        for at in (64, 128):
            prefs = preference_at(results, persona, at)
            if prefs:
                text += (f"\n\nhint-only persona {persona}, preference at {at}: "
                         + ", ".join(f"{m} {v:.2f}" for m, v in prefs.items()))
    replies = training_replies_table(results)
    if replies:
        text += "\n\nTraining replies (the simulated user's view, summed over runs):\n\n" + replies
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
