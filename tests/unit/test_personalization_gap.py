"""The v2 measurement: pleased rates, eligibility, the share of the told gap closed, the gap table and the probe
plots, on hand-built result dicts whose numbers are worked out by hand in the comments."""

from __future__ import annotations

import math

import pytest

from personalization import report
from personalization.report import (
    eligibility,
    eligibility_table,
    gap_closed,
    gap_headline,
    gap_table,
    plot_probe_curves,
    v2_results,
)


def _point(n, pleased, quality=0.5, preference=None, ood=None, probe=None):
    p = {"interactions": n, "pleased": pleased, "quality": quality, "n": 72,
         "preference": pleased if preference is None else preference}
    if ood is not None:
        p["ood"] = {"pleased": ood, "quality": quality, "n": 48}
    if probe is not None:
        p["probe"] = {"logprob": probe, "prob": math.exp(probe), "n": 36, "probes": ["Sure!"]}
    return p


def _run(persona, method, seed, told, told_quality, points, variant="", probe_told=None):
    r = {"persona": persona, "method": method, "seed": seed, "variant": variant, "model": "smollm2",
         "eval_protocol": "v2", "curve": points,
         "base_with_hint": {"pleased": told, "quality": told_quality, "preference": told, "n": 72}}
    if probe_told is not None:
        r["probe_told"] = {"logprob": probe_told}
    return r


RUNS = [
    # upbeat: hint-only (0 untold), told 0.5, quality kept (0.5 -> 0.48) -> eligible
    _run("upbeat", "combine", 0, 0.5, 0.48, [_point(0, 0.0, ood=0.0, probe=-9.0), _point(64, 0.3, ood=0.2, probe=-3.0)],
         probe_told=-2.0),
    _run("upbeat", "combine", 1, 0.5, 0.48, [_point(0, 0.0, ood=0.0, probe=-9.2), _point(64, 0.1, ood=0.1, probe=-6.0)],
         probe_told=-2.2),
    _run("upbeat", "rl", 0, 0.6, 0.48, [_point(0, 0.0), _point(64, 0.0)]),
    # concise: 0.3 untold -> 0.9 told, quality 0.5 -> 0.4: the gap is there but quality drops 0.1 -> not eligible
    _run("concise", "combine", 0, 0.9, 0.4, [_point(0, 0.3), _point(64, 0.8, quality=0.5)]),
    # student: 0.5 -> 0.6 told: gap 0.1 -> not eligible
    _run("student", "combine", 0, 0.6, 0.5, [_point(0, 0.5), _point(64, 0.55)]),
    # emoji: 0.2 -> 0.7 told, quality kept -> eligible, not hint-only
    _run("emoji", "combine", 0, 0.7, 0.5, [_point(0, 0.2), _point(32, 0.3), _point(64, 0.45, quality=0.4)]),
    # a v1 run (no protocol tag): ignored by every v2 function
    {"persona": "emoji", "method": "combine", "seed": 5, "curve": [{"interactions": 0, "preference": 0.0,
                                                                   "quality": 0.5}]},
]


def test_v2_results_keeps_only_tagged_runs():
    assert len(v2_results(RUNS)) == len(RUNS) - 1


def test_eligibility_pools_the_runs_of_distinct_seeds():
    rows = eligibility(RUNS)
    assert list(rows) == ["concise", "emoji", "student", "upbeat"]
    up = rows["upbeat"]
    # seeds 0 and 1 (the rl run of seed 0 sampled the same base replies as combine's: counted once):
    # told (0.5, 0.5) -> 0.5; untold 0 in both; quality 0.5 -> 0.48
    assert up["runs"] == 2 and up["samples"] == 144
    assert up["told_pleased"] == pytest.approx(0.5) and up["untold_pleased"] == 0.0
    assert up["gap"] == pytest.approx(0.5) and up["quality_change"] == pytest.approx(-0.02)
    assert up["eligible"] and up["hint_only"]
    assert rows["concise"]["gap"] == pytest.approx(0.6) and not rows["concise"]["eligible"]  # quality -0.1
    assert rows["student"]["gap"] == pytest.approx(0.1) and not rows["student"]["eligible"]
    assert rows["emoji"]["eligible"] and not rows["emoji"]["hint_only"]


def test_eligibility_pools_base_rate_measurements_of_other_seeds():
    rates = {"upbeat": {"told": "judge", "split": "heldout", "seed": 101234,
                        "without_hint": {"pleased": 0.1, "quality": 0.5, "n": 72},
                        "with_hint": {"pleased": 0.4, "quality": 0.44, "n": 72}},
             # told with the persona's own words, or on another split: not what eligibility is about
             "concise": {"told": "persona", "seed": 7, "without_hint": {"pleased": 0.0, "quality": 0.5, "n": 72},
                         "with_hint": {"pleased": 0.9, "quality": 0.5, "n": 72}}}
    up = eligibility(RUNS, [rates])["upbeat"]
    # seeds 0, 1 from runs and 101234 from the file: told (0.5, 0.5, 0.4), untold (0, 0, 0.1), told quality
    # (0.48, 0.48, 0.44) against 0.5 each
    assert up["runs"] == 3 and up["samples"] == 216
    assert up["gap"] == pytest.approx(0.4667 - 0.0333, abs=1e-3)
    assert up["quality_change"] == pytest.approx(-0.0333, abs=1e-3)
    assert eligibility(RUNS, [rates])["concise"]["runs"] == 1  # the persona-told row was not pooled
    # a file measured with a seed a run already used adds nothing
    same = {"upbeat": {**rates["upbeat"], "seed": 1234}}
    assert eligibility([{**RUNS[0], "eval": {"seed": 1234}}], [same])["upbeat"]["runs"] == 1


def test_runs_told_with_the_personas_own_words_are_not_pooled():
    own = _run("solo", "combine", 0, 0.9, 0.5, [_point(0, 0.0)])
    own["base_with_hint"]["source"] = "persona"
    judged = _run("solo", "combine", 1, 0.2, 0.5, [_point(0, 0.0)])
    judged["base_with_hint"]["source"] = "judge"
    row = eligibility([own, judged])["solo"]
    assert row["runs"] == 1 and row["told_pleased"] == pytest.approx(0.2)


def test_eligibility_thresholds_are_inclusive():
    at_edge = [_run("edge", "combine", 0, 0.3, 0.45, [_point(0, 0.0)])]
    row = eligibility(at_edge)["edge"]
    assert row["gap"] == pytest.approx(0.3) and row["quality_change"] == pytest.approx(-0.05)
    assert row["eligible"]
    below = [_run("edge", "combine", 0, 0.29, 0.5, [_point(0, 0.0)])]
    assert not eligibility(below)["edge"]["eligible"]


def test_gap_closed_is_a_ratio_of_seed_means():
    upbeat = [r for r in RUNS if r["persona"] == "upbeat" and r["method"] == "combine"]
    # after (0.3, 0.1) -> 0.2; before 0; told 0.5 -> 0.2 / 0.5 = 0.4
    assert gap_closed(upbeat, 64) == pytest.approx(0.4)
    assert gap_closed(upbeat, 128) is None  # no run reaches 128
    no_gap = [_run("x", "combine", 0, 0.2, 0.5, [_point(0, 0.3), _point(64, 0.5)])]
    assert gap_closed(no_gap, 64) is None  # told below untold: nothing to close
    tiny = [_run("x", "combine", 0, 0.015, 0.5, [_point(0, 0.0), _point(64, 0.5)])]
    assert gap_closed(tiny, 64) is None  # 0.5 / 0.015 would be 33: a share of noise is not reported
    overshoot = [_run("x", "combine", 0, 0.5, 0.5, [_point(0, 0.0), _point(64, 0.75)])]
    assert gap_closed(overshoot, 64) == pytest.approx(1.5)  # reported as measured, not clipped


def test_gap_headline_over_eligible_personas():
    h = gap_headline(RUNS, "combine", 64)
    # eligible: emoji (0.45 - 0.2) / (0.7 - 0.2) = 0.5, upbeat 0.4 -> mean 0.45; hint-only min: upbeat 0.4
    assert h["personas"] == 2 and h["per_persona"] == pytest.approx({"emoji": 0.5, "upbeat": 0.4})
    assert h["gap_closed"] == pytest.approx(0.45) and h["hint_only_min"] == pytest.approx(0.4)
    # quality changes: emoji 0.4 - 0.5 = -0.1, upbeat 0 -> -0.05
    assert h["quality_change"] == pytest.approx(-0.05)
    assert h["skipped"] == []
    # an explicit persona list replaces the eligibility choice
    assert gap_headline(RUNS, "combine", 64, personas=["concise"])["per_persona"] == \
        pytest.approx({"concise": (0.8 - 0.3) / (0.9 - 0.3)})
    # student's told gap (0.1) is too small to divide: listed, not averaged
    assert gap_headline(RUNS, "combine", 64, personas=["student", "emoji"])["skipped"] == ["student"]
    nothing = gap_headline(RUNS, "opd", 64)
    assert nothing["personas"] == 0 and math.isnan(nothing["gap_closed"]) and math.isnan(nothing["hint_only_min"])


def test_gap_table_rows():
    lines = gap_table(RUNS).splitlines()
    assert lines[0].startswith("| persona | method | seeds | pleased told | pleased@0 | pleased@32 |")
    rows = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): line for line in lines[2:]}
    assert set(rows) == {("concise", "combine"), ("emoji", "combine"), ("student", "combine"),
                         ("upbeat", "combine"), ("upbeat", "rl")}
    cells = [c.strip() for c in rows[("upbeat", "combine")].strip("|").split("|")]
    # seeds, told, pleased@0/32/64/128, gap, pref@0/64, qual@0/64, ood@0/64, probe@0/64
    assert cells[2:] == ["2", "0.50±0.00", "0.00±0.00", "–", "0.20±0.14", "–", "0.40", "0.00±0.00", "0.20±0.14",
                         "0.50±0.00", "0.50±0.00", "0.00±0.00", "0.15±0.07", "-9.10±0.14", "-4.50±2.12"]
    emoji = [c.strip() for c in rows[("emoji", "combine")].strip("|").split("|")]
    assert emoji[5] == "0.30" and emoji[8] == "0.50" and emoji[-1] == "–"


def test_eligibility_table_and_report_text():
    text = eligibility_table(eligibility(RUNS))
    assert "| upbeat | 2 | 144 | 0.00 | 0.50 | +0.50 | 0.50 | 0.48 | yes | yes |" in text
    assert "| concise | 1 | 72 | 0.30 | 0.90 | +0.60 | 0.50 | 0.40 | no | no |" in text
    full = report.v2_text(RUNS)
    assert "combine: share of the told gap closed at 64 = 0.450 over 2 eligible persona(s) (emoji 0.50, upbeat 0.40)" \
        in full


def test_probe_plot_per_persona(tmp_path):
    assert plot_probe_curves(RUNS, tmp_path / "probe_upbeat.png", "upbeat")
    data = (tmp_path / "probe_upbeat.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    assert not plot_probe_curves(RUNS, tmp_path / "probe_concise.png", "concise")  # no probes recorded
    assert not (tmp_path / "probe_concise.png").exists()
