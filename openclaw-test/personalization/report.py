"""Learning-curve plots and the results table, from the runner's `result.json` files.

`python -m personalization.report <results dir> [--out table.md]` finds every result.json below the
directory and prints the markdown table of openclaw-test/README.md: per persona and method, held-out preference
and quality at each checkpoint (mean +- std over seeds), the gain at 64 interactions, and the wall time; and,
for the hint-only personas (never pleased unprompted, often when told), every method's preference side by side.

Runs of the v2 evaluation protocol (`eval_protocol`, see runner.py) get the v2 tables too: each persona's
eligibility (is the model, told with the judge's hints, pleased at least `ELIGIBLE_GAP` more often than untold,
with quality kept within `ELIGIBLE_QUALITY_DROP`?), and per persona and method the pleased rate at every
checkpoint, the share of the told gap closed, the out-of-template pleased rate and the probe log-probability.
The headline is the mean share of the gap closed over the eligible personas.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from personalization.personas import MET

__all__ = ["ELIGIBLE_GAP", "ELIGIBLE_QUALITY_DROP", "eligibility", "eligibility_table", "eligibility_verdict", "gap_closed",
           "gap_headline", "gap_table", "plot_probe_curves", "v2_results",
           "collect", "headline", "hint_only_personas", "load_results", "markdown_table", "method_label",
           "plot_curve", "preference_at", "training_replies", "training_replies_table"]

# A persona is "hint-only" when the base model (almost) never pleases it unprompted but often does when told:
# Binary RL then sees only failures, and only the hint (OPD) says what to do instead.
HINT_ONLY_BASE_BELOW = 0.1
HINT_ONLY_TOLD_AT_LEAST = 0.3
# Eligibility (v2): what talking can reach is what the model does when told; a persona counts where that is
# clearly more than what it does untold, without giving up the task for it.
ELIGIBLE_GAP = 0.3
ELIGIBLE_QUALITY_DROP = 0.05
# v2's hint-only: pleased (almost) never untold, i.e. under 1 reply in 20 (72 samples: at most 3)
HINT_ONLY_PLEASED_BELOW = 0.05


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
    _save(fig, ax, path)


def _save(fig, ax, path) -> None:
    import matplotlib.pyplot as plt

    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def load_results(root: str | Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(Path(root).rglob("result.json"))]


def _stat(values: list) -> str:
    """mean±std of the values a run recorded (None and NaN, i.e. not recorded, left out); one value alone; "–"."""
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
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


def headline(results: list[dict], method: str = "combine", at: int = 64) -> dict:
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


# ---------------------------------------------------------------------------------------------------------
# v2: pleased rate, eligibility, the share of the told gap closed
# ---------------------------------------------------------------------------------------------------------

def v2_results(results: Iterable[dict]) -> list[dict]:
    """Runs measured with the v2 protocol (pleased rates, told with the judge's hints)."""
    return [r for r in results if r.get("eval_protocol") == "v2"]


def _mean(values: list[float]) -> float:
    return statistics.mean(values) if values else float("nan")


def _base_point(result: dict) -> dict | None:
    return next((p for p in result.get("curve", []) if p["interactions"] == 0), None)


def eligibility(results: Iterable[dict], base_rates: Iterable[dict] = ()) -> dict[str, dict]:
    """Per persona, pooled over the v2 runs and the base-rate measurements (`base_rates.py` files, told with the
    judge's hints) of distinct evaluation seeds (any method: nothing is trained before checkpoint 0, so runs of
    one seed measured the same replies): the pleased rate and quality untold (checkpoint 0) and told
    (`base_with_hint`), the gap, and whether it is eligible."""
    measured = []  # (persona, seed, untold summary, told summary)
    for r in v2_results(results):
        base, told = _base_point(r), r.get("base_with_hint")
        if base is not None and told and told.get("source", "judge") == "judge":
            measured.append((r["persona"], (r.get("eval") or {}).get("seed", r["seed"]), base, told))
    for rates in base_rates:
        for persona, row in rates.items():
            if row.get("told") == "judge" and row.get("split", "heldout") == "heldout":
                measured.append((persona, row.get("seed"), row["without_hint"], row["with_hint"]))
    pooled: dict = defaultdict(lambda: defaultdict(list))
    seen = set()
    for persona, seed, base, told in measured:
        if (persona, seed) in seen:
            continue
        seen.add((persona, seed))
        cell = pooled[persona]
        for key, point in (("untold", base), ("told", told)):
            cell[f"{key}_pleased"].append(point["pleased"])
            cell[f"{key}_quality"].append(point["quality"])
            cell[f"{key}_n"].append(point["n"])
    out = {}
    for persona, cell in sorted(pooled.items()):
        row = {key: round(_mean(values), 4) for key, values in cell.items() if not key.endswith("_n")}
        row["runs"] = len(cell["untold_pleased"])
        row["samples"] = sum(cell["untold_n"])
        row.update(eligibility_verdict({"pleased": row["untold_pleased"], "quality": row["untold_quality"]},
                                       {"pleased": row["told_pleased"], "quality": row["told_quality"]}))
        out[persona] = row
    return out


def eligibility_verdict(untold: dict, told: dict) -> dict:
    """The told gap between two summaries ({pleased, quality}) and what follows from it: eligible (told it is
    pleased at least ELIGIBLE_GAP more often, quality kept within ELIGIBLE_QUALITY_DROP) and hint-only (almost
    never pleased untold: HINT_ONLY_PLEASED_BELOW)."""
    gap = round(told["pleased"] - untold["pleased"], 4)
    quality_change = round(told["quality"] - untold["quality"], 4)
    # a hair of tolerance: 0.3 - 0.0 and -0.05 must count as at the threshold, not below it
    return {"gap": gap, "quality_change": quality_change,
            "eligible": gap >= ELIGIBLE_GAP - 1e-9 and quality_change >= -ELIGIBLE_QUALITY_DROP - 1e-9,
            "hint_only": untold["pleased"] < HINT_ONLY_PLEASED_BELOW}


def eligibility_table(rows: dict[str, dict]) -> str:
    lines = ["| persona | seeds | samples each | pleased untold | pleased told | gap | quality untold | quality told | "
             "eligible | hint-only |", "|" + "---|" * 10]
    for persona, r in rows.items():
        lines.append(f"| {persona} | {r['runs']} | {r['samples']} | {r['untold_pleased']:.2f} | {r['told_pleased']:.2f} | "
                     f"{r['gap']:+.2f} | {r['untold_quality']:.2f} | {r['told_quality']:.2f} | "
                     f"{'yes' if r['eligible'] else 'no'} | {'yes' if r['hint_only'] else 'no'} |")
    return "\n".join(lines)


def gap_closed(runs: list[dict], at: int) -> float | None:
    """The share of the told gap closed by `at` interactions over a persona's runs (one method), from the means
    over seeds: (pleased@at - pleased@0) / (pleased told - pleased@0). None without runs reaching `at` or
    when these runs' own told gap is under ELIGIBLE_GAP."""
    before, after, told = [], [], []
    for r in runs:
        points = {p["interactions"]: p for p in r.get("curve", [])}
        if 0 in points and at in points and r.get("base_with_hint"):
            before.append(points[0]["pleased"])
            after.append(points[at]["pleased"])
            told.append(r["base_with_hint"]["pleased"])
    if not before:
        return None
    gap = _mean(told) - _mean(before)
    # a share of a gap this small is noise over noise (0.5 / 0.015 = 33): only an eligible-sized gap is divided
    return None if gap < ELIGIBLE_GAP - 1e-9 else (_mean(after) - _mean(before)) / gap


def _by_persona_method(results: Iterable[dict]) -> dict:
    grouped: dict = defaultdict(list)
    for r in v2_results(results):
        grouped[(r["persona"], method_label(r))].append(r)
    return grouped


def gap_headline(results: list[dict], method: str = "combine", at: int = 64,
                 personas: Iterable[str] | None = None, base_rates: Iterable[dict] = ()) -> dict:
    """Mean share of the told gap closed at `at` over the eligible personas (or `personas`), the minimum over
    the hint-only ones, and the mean quality change, for one method."""
    rows = eligibility(results, base_rates)
    chosen = list(personas) if personas is not None else [p for p, r in rows.items() if r["eligible"]]
    grouped = _by_persona_method(results)
    shares, quality, per_persona, skipped = [], [], {}, []
    for persona in chosen:
        runs = grouped.get((persona, method), [])
        share = gap_closed(runs, at)
        if share is None:
            skipped.append(persona)
            continue
        per_persona[persona] = share
        shares.append(share)
        changes = [(pts[at]["quality"] - pts[0]["quality"]) for pts in
                   ({p["interactions"]: p for p in r["curve"]} for r in runs) if 0 in pts and at in pts]
        quality.append(_mean(changes))
    hint_only = [per_persona[p] for p in per_persona if rows.get(p, {}).get("hint_only")]
    return {"personas": len(shares), "gap_closed": _mean(shares), "per_persona": per_persona, "skipped": skipped,
            "hint_only_min": min(hint_only) if hint_only else float("nan"),
            "quality_change": _mean(quality)}


def gap_table(results: list[dict], checkpoints: tuple[int, ...] = (0, 32, 64, 128)) -> str:
    """Per persona and method (v2 runs): pleased told and at each checkpoint, the share of the gap closed at 64,
    preference and quality at 0 and 64, the out-of-template pleased rate and the probe log-probability."""
    head = (["persona", "method", "seeds", "pleased told"] + [f"pleased@{n}" for n in checkpoints]
            + ["gap closed @64", "pref@0", "pref@64", "qual@0", "qual@64", "ood pleased@0", "ood pleased@64",
               "probe logp@0", "probe logp@64"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (persona, method), runs in sorted(_by_persona_method(results).items()):
        points = [{p["interactions"]: p for p in r.get("curve", [])} for r in runs]

        def at(n, *keys):
            out = []
            for pts in points:
                value = pts.get(n)
                for key in keys:
                    value = value.get(key) if isinstance(value, dict) else None
                out.append(value)
            return out

        share = gap_closed(runs, 64)
        cells = [persona, method, str(len(runs)), _stat([(r.get("base_with_hint") or {}).get("pleased") for r in runs])]
        cells += [_stat(at(n, "pleased")) for n in checkpoints]
        cells.append("–" if share is None else f"{share:.2f}")
        cells += [_stat(at(0, "preference")), _stat(at(64, "preference")), _stat(at(0, "quality")),
                  _stat(at(64, "quality")), _stat(at(0, "ood", "pleased")), _stat(at(64, "ood", "pleased")),
                  _stat(at(0, "probe", "logprob")), _stat(at(64, "probe", "logprob"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_probe_curves(results: list[dict], path: str | Path, persona: str) -> bool:
    """One PNG per persona: the probe's mean log-probability against interactions, a line per run (colour by
    method), and the told level as a dotted line. False when no run of the persona has probes."""
    runs = [r for r in v2_results(results) if r["persona"] == persona
            and any("probe" in p for p in r.get("curve", []))]
    if not runs:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    colours: dict = {}
    for r in sorted(runs, key=lambda r: (method_label(r), r["seed"])):
        label = method_label(r)
        colour = colours.setdefault(label, f"C{len(colours)}")
        # the dense curve (probes between checkpoints too) where the run recorded it, else the checkpoints'
        pts = r.get("probe_curve") or [{"interactions": p["interactions"], **p["probe"]} for p in r["curve"]
                                        if "probe" in p]
        ax.plot([p["interactions"] for p in pts], [p["logprob"] for p in pts], "o-", color=colour, markersize=3,
                alpha=0.8, label=label if label not in ax.get_legend_handles_labels()[1] else None)
    told = [r["probe_told"]["logprob"] for r in runs if r.get("probe_told")]
    if told:
        ax.axhline(statistics.mean(told), color="gray", linestyle=":", label="base model told (judge's hints)")
    ax.set_xlabel("interactions")
    ax.set_ylabel("mean log P(reply opens as preferred)")
    probes = next(p["probe"]["probes"] for r in runs for p in r["curve"] if "probe" in p)
    ax.set_title(f"{persona}: {' | '.join(probes)}")
    _save(fig, ax, path)
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", help="directory searched for result.json files")
    parser.add_argument("--out", help="also write the table to this file")
    parser.add_argument("--plots", help="write the probe log-probability curves (one PNG per persona) here")
    args = parser.parse_args(argv)
    results = load_results(args.root)
    if not results:
        raise SystemExit(f"no result.json under {args.root}")
    text = ""
    if v2_results(results):
        text += v2_text(results, args.plots, load_base_rates(args.root)) + "\n\nv1 protocol and all runs:\n\n"
    text += markdown_table(results)
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


def load_base_rates(root: str | Path) -> list[dict]:
    """Every `eligibility.json` (`base_rates.py --out`) below `root`."""
    return [json.loads(p.read_text()) for p in sorted(Path(root).rglob("eligibility.json"))]


def v2_text(results: list[dict], plots: str | None = None, base_rates: Iterable[dict] = ()) -> str:
    """The v2 part of the report: eligibility, the gap table, the headline per method, the probe plots."""
    base_rates = list(base_rates)
    rows = eligibility(results, base_rates)
    text = ("Eligibility (pooled over the v2 runs and base-rate measurements of distinct evaluation seeds):\n\n"
            + eligibility_table(rows))
    text += "\n\n" + gap_table(results)
    for method in sorted({method_label(r) for r in v2_results(results)}):
        for at in (64, 128):
            h = gap_headline(results, method, at, base_rates=base_rates)
            if h["personas"]:
                text += (f"\n\n{method}: share of the told gap closed at {at} = {h['gap_closed']:.3f} over "
                         f"{h['personas']} eligible persona(s) ("
                         + ", ".join(f"{p} {v:.2f}" for p, v in h["per_persona"].items())
                         + f"); hint-only minimum {h['hint_only_min']:.3f}; quality change {h['quality_change']:+.3f}")
    if plots:
        Path(plots).mkdir(parents=True, exist_ok=True)
        made = [p for p in sorted({r["persona"] for r in v2_results(results)})
                if plot_probe_curves(results, Path(plots) / f"probe_{p}.png", p)]
        if made:
            text += "\n\nProbe curves: " + ", ".join(f"{plots}/probe_{p}.png" for p in made)
    return text


if __name__ == "__main__":
    main()
