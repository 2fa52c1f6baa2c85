"""The results table, headline numbers and plots, on hand-built result dicts (2 personas x 2 methods x 2 seeds)."""

from __future__ import annotations

import json
import math

import pytest

from personalization import report
from personalization.report import collect, headline, load_results, markdown_table, plot_curve

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _result(persona, method, seed, points, hint=None):
    """points: (interactions, preference, quality, wall_seconds or None)."""
    curve = []
    for n, pref, qual, wall in points:
        p = {"interactions": n, "preference": pref, "quality": qual}
        if wall is not None:
            p["wall_seconds"] = wall
        curve.append(p)
    r = {"persona": persona, "method": method, "seed": seed, "model": "tiny", "curve": curve}
    if hint is not None:
        r["base_with_hint"] = {"preference": hint, "quality": 1.0}
    return r


RESULTS = [
    _result("concise", "combine", 0, [(0, 0.2, 0.9, 0.0), (32, 0.5, 0.9, 300.0), (64, 0.8, 0.8, 600.0)], hint=0.7),
    _result("concise", "combine", 1, [(0, 0.4, 0.9, 0.0), (32, 0.6, 0.9, 320.0), (64, 1.0, 0.9, 720.0)], hint=0.9),
    _result("concise", "rl", 0, [(0, 0.2, 0.9, 0.0), (32, 0.3, 0.9, 200.0), (64, 0.4, 0.9, 400.0)]),
    _result("concise", "rl", 1, [(0, 0.4, 0.9, 0.0), (32, 0.4, 0.8, 200.0), (64, 0.4, 0.7, 400.0)]),
    # student/combine: seed 1 has no point at 32 (one value -> no ±)
    _result("student", "combine", 0, [(0, 0.1, 1.0, 0.0), (32, 0.3, 1.0, 100.0), (64, 0.5, 0.9, 200.0)], hint=0.6),
    _result("student", "combine", 1, [(0, 0.3, 1.0, 0.0), (64, 0.5, 0.9, 240.0)], hint=0.6),
    # student/rl: no point at 32 at all (shown as "–"), and no wall time recorded at 0
    _result("student", "rl", 1, [(0, 0.3, 1.0, None), (64, 0.2, 0.8, 300.0)]),
    _result("student", "rl", 0, [(0, 0.1, 1.0, None), (64, 0.2, 1.0, 300.0)]),
]

HEADER = ("| persona | method | seeds | base told pref. | pref@0 | pref@32 | pref@64 | pref@128 | qual@0 | qual@32 | "
          "qual@64 | qual@128 | wall min @64 | wall min @128 |")
SEPARATOR = "|" + "---|" * 14

# by hand: mean of (a, b) and the sample standard deviation |a - b| / sqrt(2)
ROWS = [
    # concise/combine: pref 0: (.2,.4) -> .30±.14; 32: (.5,.6) -> .55±.07; 64: (.8,1.0) -> .90±.14
    #                  qual 0/32: .90±.00; 64: (.8,.9) -> .85±.07; hint (.7,.9) -> .80±.14; wall 64: (10,12) min
    "| concise | combine | 2 | 0.80±0.14 | 0.30±0.14 | 0.55±0.07 | 0.90±0.14 | – | 0.90±0.00 | 0.90±0.00 | "
    "0.85±0.07 | – | 11.00±1.41 | – |",
    # concise/rl: pref (.2,.4) (.3,.4) (.4,.4); qual (.9,.9) (.9,.8) (.9,.7); no hint; wall 400 s = 6.67 min
    "| concise | rl | 2 | – | 0.30±0.14 | 0.35±0.07 | 0.40±0.00 | – | 0.90±0.00 | 0.85±0.07 | 0.80±0.14 | – | "
    "6.67±0.00 | – |",
    # student/combine: 32 only from seed 0; wall 64: (200, 240) s = (3.33, 4.00) min -> 3.67±0.47
    "| student | combine | 2 | 0.60±0.00 | 0.20±0.14 | 0.30 | 0.50±0.00 | – | 1.00±0.00 | 1.00 | 0.90±0.00 | – | "
    "3.67±0.47 | – |",
    # student/rl: no 32 at all; qual 64 (.8, 1.0) -> .90±.14; wall 300 s = 5 min
    "| student | rl | 2 | – | 0.20±0.14 | – | 0.20±0.00 | – | 1.00±0.00 | – | 0.90±0.14 | – | 5.00±0.00 | – |",
]


def test_collect_groups_by_persona_and_method():
    table = collect(RESULTS)
    assert set(table) == {("concise", "combine"), ("concise", "rl"), ("student", "combine"), ("student", "rl")}
    row = table[("concise", "combine")]
    assert row["seeds"] == [0, 1]
    assert row["hint"] == [0.7, 0.9]
    assert set(row["points"]) == {0, 32, 64}
    assert row["points"][64]["preference"] == [0.8, 1.0]
    assert row["points"][64]["quality"] == [0.8, 0.9]
    assert row["points"][64]["wall"] == [600.0, 720.0]
    assert table[("concise", "rl")]["hint"] == []
    assert table[("student", "combine")]["points"][32]["preference"] == [0.3]
    assert 32 not in table[("student", "rl")]["points"]
    assert table[("student", "rl")]["seeds"] == [1, 0]  # input order
    assert table[("student", "rl")]["points"][0]["wall"] == [0.0, 0.0]  # missing wall time counts as 0


def test_collect_accepts_a_generator_and_results_without_curve():
    table = collect(r for r in [{"persona": "p", "method": "m", "seed": 3}])
    assert table[("p", "m")]["seeds"] == [3] and dict(table[("p", "m")]["points"]) == {}


def test_markdown_table_exact():
    assert markdown_table(RESULTS) == "\n".join([HEADER, SEPARATOR, *ROWS])


def test_markdown_table_does_not_depend_on_result_order():
    assert markdown_table(list(reversed(RESULTS))) == markdown_table(RESULTS)


def test_markdown_table_single_seed_and_custom_checkpoints():
    text = markdown_table([RESULTS[0]], checkpoints=(0, 64))
    lines = text.splitlines()
    assert lines[0] == ("| persona | method | seeds | base told pref. | pref@0 | pref@64 | qual@0 | qual@64 | "
                        "wall min @64 | wall min @128 |")
    assert lines[1] == "|" + "---|" * 10
    assert lines[2] == "| concise | combine | 1 | 0.70 | 0.20 | 0.80 | 0.90 | 0.80 | 10.00 | – |"
    assert len(lines) == 3


def test_markdown_table_of_nothing_is_the_header():
    assert markdown_table([]) == HEADER + "\n" + SEPARATOR


def test_headline_gain_and_quality_change():
    h = headline(RESULTS, "combine", 64)
    # concise: .90 - .30 = .60, student: .50 - .20 = .30 -> .45
    # quality: concise .85 - .90 = -.05, student .90 - 1.00 = -.10 -> -.075
    assert h["personas"] == 2
    assert h["preference_gain"] == pytest.approx(0.45)
    assert h["quality_change"] == pytest.approx(-0.075)

    h = headline(RESULTS, "rl", 64)
    # concise .40 - .30 = .10, student .20 - .20 = 0 -> .05; quality -.10 and -.10 -> -.10
    assert h == {"personas": 2, "preference_gain": pytest.approx(0.05), "quality_change": pytest.approx(-0.1)}

    # at 32 only the personas with a point there count (student/rl has none)
    h = headline(RESULTS, "rl", 32)
    assert h == {"personas": 1, "preference_gain": pytest.approx(0.05), "quality_change": pytest.approx(-0.05)}
    h = headline(RESULTS, "combine", 32)  # concise .55 - .30, student .30 - .20
    assert h["personas"] == 2 and h["preference_gain"] == pytest.approx(0.175)


def test_headline_defaults_and_nothing_to_report():
    assert headline(RESULTS) == headline(RESULTS, "combine", 64)
    for h in (headline(RESULTS, "combine", 128), headline(RESULTS, "opd", 64), headline([], "combine", 64)):
        assert h["personas"] == 0
        assert math.isnan(h["preference_gain"]) and math.isnan(h["quality_change"])


def _png_ok(path):
    data = path.read_bytes()
    assert len(data) > 1000
    assert data[:8] == PNG_MAGIC


def test_plot_curve_writes_a_png(tmp_path):
    path = tmp_path / "curve.png"
    plot_curve(RESULTS[0], path)
    _png_ok(path)


def test_plot_curve_without_hint_or_points(tmp_path):
    plot_curve(RESULTS[2], str(tmp_path / "no_hint.png"))
    _png_ok(tmp_path / "no_hint.png")
    plot_curve({"persona": "p", "method": "m", "curve": []}, tmp_path / "empty.png")
    _png_ok(tmp_path / "empty.png")


def _write_results(root):
    for i, r in enumerate(RESULTS):
        d = root / r["persona"] / r["method"] / f"seed{r['seed']}"
        d.mkdir(parents=True)
        (d / "result.json").write_text(json.dumps(r))
    (root / "notes.json").write_text("{}")  # only files named result.json are read


def test_load_results_finds_every_result_json(tmp_path):
    _write_results(tmp_path)
    loaded = load_results(tmp_path)
    assert len(loaded) == len(RESULTS)
    key = lambda r: (r["persona"], r["method"], r["seed"])  # noqa: E731
    assert sorted(loaded, key=key) == sorted(RESULTS, key=key)


def test_main_prints_the_table_and_writes_out(tmp_path, capsys):
    root = tmp_path / "results"
    _write_results(root)
    out = tmp_path / "table.md"
    report.main([str(root), "--out", str(out)])
    printed = capsys.readouterr().out
    expected = "\n".join([HEADER, SEPARATOR, *ROWS]) + (
        "\n\ncombine: mean preference gain at 64 = +0.450, quality change -0.075 over 2 persona(s)"
        "\n\nrl: mean preference gain at 64 = +0.050, quality change -0.100 over 2 persona(s)")
    assert printed == expected + "\n"
    assert out.read_text() == expected + "\n"


def test_main_without_out_only_prints(tmp_path, capsys):
    _write_results(tmp_path)
    report.main([str(tmp_path)])
    printed = capsys.readouterr().out
    assert printed.startswith(HEADER)
    assert "at 128" not in printed  # no result reaches 128 interactions
    assert sorted(p.name for p in tmp_path.iterdir()) == ["concise", "notes.json", "student"]


def test_main_on_an_empty_directory_exits_with_an_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        report.main([str(tmp_path)])
    assert isinstance(info.value.code, str) and "no result.json" in info.value.code  # a message -> exit status 1
    assert capsys.readouterr().out == ""


def test_a_variant_gets_its_own_row_and_headline():
    base = _result("concise", "combine", 0, [(0, 0.2, 0.5, 60.0), (64, 0.4, 0.5, 400.0)])
    probe = {**_result("concise", "combine", 0, [(0, 0.2, 0.5, 60.0), (64, 0.9, 0.3, 400.0)]), "variant": "lr5e-5"}
    table = markdown_table([base, probe], checkpoints=(0, 64))
    assert "| concise | combine | 1 |" in table and "| concise | combine [lr5e-5] | 1 |" in table
    assert headline([base, probe], "combine")["preference_gain"] == pytest.approx(0.2)
    assert headline([base, probe], "combine [lr5e-5]")["preference_gain"] == pytest.approx(0.7)


def test_hint_only_personas_are_never_pleased_unprompted_but_often_when_told():
    greeter = [_result("greeter", m, seed, [(0, 0.0, 0.5, 0.0), (64, pref, 0.5, 400.0)], hint=0.6)
               for m, seed, pref in (("combine", 0, 0.5), ("combine", 1, 0.3), ("rl", 0, 0.0))]
    never_even_told = _result("mute", "combine", 0, [(0, 0.0, 0.5, 0.0)], hint=0.2)
    no_hint_measured = _result("quiet", "combine", 0, [(0, 0.0, 0.5, 0.0)])
    results = RESULTS + greeter + [never_even_told, no_hint_measured]
    # concise (base .30) and student (.20) are met unprompted sometimes: both methods have a signal there
    assert report.hint_only_personas(results) == ["greeter"]
    assert report.preference_at(results, "greeter", 64) == {"combine": pytest.approx(0.4), "rl": 0.0}
    assert report.preference_at(results, "greeter", 128) == {}


def test_main_compares_the_methods_on_hint_only_personas(tmp_path, capsys):
    for seed, (method, pref) in enumerate((("combine", 0.5), ("rl", 0.0))):
        d = tmp_path / f"run{seed}"
        d.mkdir()
        r = _result("greeter", method, 0, [(0, 0.0, 0.5, 0.0), (64, pref, 0.5, 400.0)], hint=0.6)
        (d / "result.json").write_text(json.dumps(r))
    report.main([str(tmp_path)])
    assert capsys.readouterr().out.rstrip().endswith(
        "hint-only persona greeter, preference at 64: combine 0.50, rl 0.00")


def test_training_replies_count_what_met_the_preference_and_still_answered():
    rows = [{"preference": 1.0, "quality": 0.0, "turn": 2},   # a greeting and nothing else
            {"preference": 1.0, "quality": 0.5, "turn": 1},   # greeted and answered at once
            {"preference": 0.75, "quality": 1.0, "turn": 2},  # exactly at the threshold counts
            {"preference": 0.74, "quality": 1.0, "turn": 1},  # just below does not
            {"preference": 0.0, "quality": 0.5}]              # no turn recorded: a first attempt
    assert report.training_replies(rows) == {"n": 5, "met": 3, "met_and_answered": 2, "met_first_attempt": 1}
    assert report.training_replies(iter([])) == {"n": 0, "met": 0, "met_and_answered": 0, "met_first_attempt": 0}
    assert report.training_replies(rows, met=1.0)["met"] == 2


def test_training_replies_table_sums_over_runs_and_skips_runs_without_them():
    a = _result("greeter", "combine", 0, [(0, 0.0, 0.5, 0.0)])
    b = _result("greeter", "combine", 1, [(0, 0.0, 0.5, 0.0)])
    c = _result("greeter", "rl", 0, [(0, 0.0, 0.5, 0.0)])
    a["training_replies"] = {"n": 128, "met": 8, "met_and_answered": 0, "met_first_attempt": 0}
    b["training_replies"] = {"n": 128, "met": 11, "met_and_answered": 1, "met_first_attempt": 2}
    assert report.training_replies_table([a, b, c]).splitlines()[2:] == [
        "| greeter | combine | 2 | 256 | 19 | 1 | 2 |"]
    assert report.training_replies_table([c]) == ""


def test_main_prints_the_training_replies_when_recorded(tmp_path, capsys):
    r = _result("greeter", "rl", 0, [(0, 0.0, 0.5, 0.0), (64, 0.0, 0.5, 60.0)], hint=0.6)
    r["training_replies"] = {"n": 64, "met": 3, "met_and_answered": 1, "met_first_attempt": 0}
    (tmp_path / "result.json").write_text(json.dumps(r))
    report.main([str(tmp_path)])
    out = capsys.readouterr().out
    assert "Training replies" in out and "| greeter | rl | 1 | 64 | 3 | 1 | 0 |" in out
