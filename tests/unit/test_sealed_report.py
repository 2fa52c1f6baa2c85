"""The sealed report's verdict (slime.agentic.sealed_report.judge): every rule, on records as the plugin writes
them, and the plugin itself in a real pytest process fed through a real socket pair."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from slime.agentic import sealed_report as sr
from slime.agentic.sealed_report import ReportChannel, ReportSpec, collected_ids, judge


def _spec(mode="run"):
    return ReportSpec("n" * 32, mode, {"test_output_aaaa": "pass", "test_format_bbbb": "fail"} if mode == "run" else {})


def _records(spec, outcomes, *, canaries=None, exitstatus=None, extra=(), end=True, collected=None, **end_fields):
    """The lines the plugin writes for `outcomes` (id -> passed/failed/skipped) and the canaries."""
    canaries = {"test_output_aaaa": "passed", "test_format_bbbb": "failed"} if canaries is None else canaries
    ids = list(outcomes) + [f"test_outputs.py::{name}" for name in canaries]
    recs = [{"t": "start", "nonce": spec.nonce, "pid": 7, "sealed": True, "mode": spec.mode},
            {"t": "collected", "ids": ids if collected is None else collected}]
    for nodeid, outcome in [*outcomes.items(), *((f"test_outputs.py::{n}", o) for n, o in canaries.items())]:
        recs.append({"t": "case", "id": nodeid, "when": "setup", "outcome": "passed", "xfail": False, "msg": ""})
        recs.append({"t": "case", "id": nodeid, "when": "call", "outcome": outcome, "xfail": False, "msg": ""})
        recs.append({"t": "case", "id": nodeid, "when": "teardown", "outcome": "passed", "xfail": False, "msg": ""})
    recs += list(extra)
    if end:
        failing = any(o == "failed" for o in outcomes.values())
        recs.append({"t": "end", "nonce": spec.nonce, "exitstatus": int(failing) if exitstatus is None else exitstatus,
                     "stopped_early": False, "replaced": [], "foreign_plugins": [], **end_fields})
    return "".join(json.dumps(r) + "\n" for r in recs).encode()


EXPECTED = ["test_outputs.py::test_a", "test_outputs.py::test_b"]


def test_an_honest_report_counts_each_expected_test():
    spec = _spec()
    v = judge(_records(spec, {EXPECTED[0]: "passed", EXPECTED[1]: "failed"}), spec, expected=EXPECTED, exit_code=1)
    assert not v.reason and not v.tampered
    assert v.outcomes() == {EXPECTED[0]: "passed", EXPECTED[1]: "failed"}
    assert v.junit().passed == 1 and v.junit().total == 2
    v = judge(_records(spec, dict.fromkeys(EXPECTED, "passed")), spec, expected=EXPECTED, exit_code=0)
    assert v.junit().all_passed and not v.reason


@pytest.mark.parametrize("canaries, what", [
    ({"test_output_aaaa": "passed", "test_format_bbbb": "passed"}, "must fail was reported passed"),
    ({"test_output_aaaa": "failed", "test_format_bbbb": "failed"}, "must pass was reported failed"),
    ({"test_output_aaaa": "passed"}, "must fail did not run"),
])
def test_a_flipped_or_dropped_canary_is_tampering(canaries, what):
    spec = _spec()
    v = judge(_records(spec, dict.fromkeys(EXPECTED, "passed"), canaries=canaries), spec, expected=EXPECTED, exit_code=0)
    assert v.tampered and what in v.reason and v.junit().total == 0


def test_a_missing_canary_after_an_early_stop_is_not_tampering_but_the_run_does_not_count():
    spec = _spec()
    data = _records(spec, {EXPECTED[0]: "failed"}, canaries={}, collected=EXPECTED + [
        "test_outputs.py::test_output_aaaa", "test_outputs.py::test_format_bbbb"], stopped_early=True)
    v = judge(data, spec, expected=EXPECTED, exit_code=1)
    assert not v.tampered and "does not count" in v.reason and v.junit().total == 0
    # "stopped early" is the plugin's word, which code in pytest's process could give: with the canaries removed and
    # three of four outcomes flipped, it would otherwise have earned partial credit
    four = EXPECTED + ["test_outputs.py::test_c", "test_outputs.py::test_d"]
    forged = _records(spec, {**dict.fromkeys(four[:3], "passed"), four[3]: "failed"}, canaries={}, stopped_early=True)
    v = judge(forged, spec, expected=four, exit_code=1)
    assert v.junit().total == 0 and v.junit().reward == -1.0


@pytest.mark.parametrize("mutate, what", [
    (lambda d, s: d + b'{"t": "case", "id": "x", "when": "call", "outcome": "passed"}\n', "after the test session ended"),
    (lambda d, s: d + b"PASSED everything\n", "not the harness's"),
    (lambda d, s: d[:-1], "middle of a line"),
    (lambda d, s: d.replace(s.nonce.encode(), b"f" * 32), "wrong nonce"),
    (lambda d, s: _records(s, {}, canaries={}, end=False) + d, "2 test sessions"),
    (lambda d, s: b'{"t": "case", "id": "x", "when": "call", "outcome": "passed"}\n' + d, "before the test session"),
])
def test_data_in_the_channel_that_is_not_the_plugins_is_tampering(mutate, what):
    spec = _spec()
    data = mutate(_records(spec, dict.fromkeys(EXPECTED, "passed")), spec)
    v = judge(data, spec, expected=EXPECTED, exit_code=0)
    assert v.tampered and what in v.reason


def test_results_for_a_test_never_collected_replaced_functions_and_foreign_plugins_are_tampering():
    spec = _spec()
    stranger = {"t": "case", "id": "test_outputs.py::test_z", "when": "call", "outcome": "passed"}
    v = judge(_records(spec, dict.fromkeys(EXPECTED, "passed"), extra=[stranger]), spec, expected=EXPECTED, exit_code=0)
    assert v.tampered and "never collected" in v.reason
    v = judge(_records(spec, dict.fromkeys(EXPECTED, "passed"), replaced=["reports.TestReport.__init__"]), spec,
              expected=EXPECTED, exit_code=0)
    assert v.tampered and "TestReport.__init__" in v.reason
    v = judge(_records(spec, dict.fromkeys(EXPECTED, "passed"), foreign_plugins=["evil"]), spec, expected=EXPECTED,
              exit_code=0)
    assert v.tampered and "evil" in v.reason


@pytest.mark.parametrize("outcomes, what", [
    ({EXPECTED[0]: "passed"}, "missing"),
    ({**dict.fromkeys(EXPECTED, "passed"), "test_outputs.py::test_c": "passed"}, "not expected"),
    ({"test_outputs.py::test_A": "passed", EXPECTED[1]: "passed"}, "missing"),  # renamed
])
def test_a_run_whose_tests_are_not_the_expected_ones_fails_without_tampering(outcomes, what):
    spec = _spec()
    v = judge(_records(spec, outcomes), spec, expected=EXPECTED, exit_code=0)
    assert not v.tampered and what in v.reason and v.junit().total == 0


def test_an_exit_status_that_disagrees_with_the_report_fails():
    spec = _spec()
    v = judge(_records(spec, dict.fromkeys(EXPECTED, "passed")), spec, expected=EXPECTED, exit_code=1)
    assert "disagrees" in v.reason and not v.tampered
    v = judge(_records(spec, {EXPECTED[0]: "passed", EXPECTED[1]: "failed"}), spec, expected=EXPECTED, exit_code=0)
    assert "disagrees" in v.reason


def test_no_session_an_unfinished_one_an_unsealed_one_and_a_timeout_fail_without_tampering():
    spec = _spec()
    for data, what in [(b"", "did not report"), (_records(spec, {}, end=False), "did not finish"),
                       (_records(spec, {}).replace(b'"sealed": true', b'"sealed": false'), "non-dumpable")]:
        v = judge(data, spec, expected=EXPECTED, exit_code=0)
        assert what in v.reason and not v.tampered
    v = judge(_records(spec, dict.fromkeys(EXPECTED, "passed")), spec, expected=EXPECTED, exit_code=0, timed_out=True)
    assert "timed out" in v.reason and v.junit().total == 0
    assert "more than" in judge(b"", spec, expected=EXPECTED, exit_code=0, overflow=True).reason


def test_setup_and_teardown_failures_are_errors_and_skips_are_not_passes():
    spec = _spec()
    data = _records(spec, dict.fromkeys(EXPECTED, "passed"), exitstatus=1, extra=[
        {"t": "case", "id": EXPECTED[0], "when": "teardown", "outcome": "failed"}])
    assert judge(data, spec, expected=EXPECTED, exit_code=1).outcomes()[EXPECTED[0]] == "error"
    data = _records(spec, {EXPECTED[0]: "skipped", EXPECTED[1]: "passed"})
    v = judge(data, spec, expected=EXPECTED, exit_code=0)
    assert v.outcomes()[EXPECTED[0]] == "skipped" and v.junit().passed == 1


def test_a_collect_session_lists_ids_and_a_collection_error_is_named():
    spec = _spec("collect")
    data = _records(spec, {}, canaries={}, collected=EXPECTED)
    assert collected_ids(data, spec, exit_code=0) == (tuple(EXPECTED), "")
    bad = _records(spec, {}, canaries={}, collected=[], extra=[{"t": "collecterror", "id": "test_outputs.py", "msg": "E   SyntaxError"}])
    ids, why = collected_ids(bad, spec, exit_code=2)
    assert ids == () and "SyntaxError" in why
    assert "another mode" in judge(data, _spec("run").__class__(spec.nonce, "run", {}), expected=EXPECTED, exit_code=0).reason


def test_fresh_specs_have_fresh_nonces_and_canary_names():
    a, b = ReportSpec.new(), ReportSpec.new()
    assert a.nonce != b.nonce and set(a.canaries) != set(b.canaries)
    assert sorted(a.canaries.values()) == ["fail", "pass"] and all(n.startswith("test_") for n in a.canaries)
    assert ReportSpec.new("collect").canaries == {}
    with pytest.raises(ValueError):
        ReportSpec.new("other")


def _run_pytest(tmp_path, test_source, spec, *, extra_args=(), conftest=None, site=None):
    """A real pytest process with the plugin, reporting through a real channel (no sandbox: the plugin's logic).
    `site`: a folder of installed distributions put on the path with plugin autoload on (an image's plugins)."""
    (tmp_path / "test_t.py").write_text(textwrap.dedent(test_source))
    if conftest:
        (tmp_path / "conftest.py").write_text(textwrap.dedent(conftest))
    plugin_dir = tmp_path / "harness"
    plugin_dir.mkdir()
    (plugin_dir / sr.PLUGIN_FILE).write_bytes(sr.plugin_source().read_bytes())
    channel = ReportChannel(spec)
    env = {**os.environ, **channel.env(), "PYTHONPATH": os.pathsep.join(map(str, filter(None, (plugin_dir, site)))),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "" if site else "1", "PYTEST_ADDOPTS": ""}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", sr.PLUGIN_MODULE, "-p", "no:cacheprovider", "-q",
                           "test_t.py", *extra_args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          pass_fds=(channel.inside_fd,), timeout=120)
    return proc, channel.collect()


def test_the_plugin_in_a_real_pytest_reports_uncounts_its_failing_canary_and_keeps_the_exit_status(tmp_path):
    spec = ReportSpec.new()
    proc, data = _run_pytest(tmp_path, """
        def test_a():
            assert True
        def test_b():
            assert True
    """, spec)
    assert proc.returncode == 0, proc.stdout  # the failing canary does not fail the session
    assert "2 canary" in proc.stdout and "failed" not in proc.stdout
    v = judge(data, spec, expected=["test_t.py::test_a", "test_t.py::test_b"], exit_code=proc.returncode)
    assert not v.reason and v.junit().all_passed and set(v.canaries.values()) == {"passed", "failed"}


def test_the_channel_is_not_inherited_by_what_the_tests_start(tmp_path):
    spec = ReportSpec.new()
    child = ("import os, stat\n"
             "socks = []\n"
             "for fd in range(3, 1024):\n"
             "    try:\n"
             "        st = os.fstat(fd)\n"
             "    except OSError:\n"
             "        continue\n"
             "    if stat.S_ISSOCK(st.st_mode):\n"
             "        socks.append(fd)\n"
             "print('SOCKS', socks, 'ENV', os.environ.get('SLIME_SEALED_FD'))\n")
    proc, data = _run_pytest(tmp_path, f"""
        import subprocess, sys
        def test_child_sees_no_socket():
            # close_fds=False: whatever is inheritable reaches the child (bash, os.system and exec do the same)
            out = subprocess.run([sys.executable, "-c", {child!r}], capture_output=True, text=True,
                                 close_fds=False).stdout
            assert "SOCKS [] ENV None" in out, out
    """, spec)
    v = judge(data, spec, expected=["test_t.py::test_child_sees_no_socket"], exit_code=proc.returncode)
    assert not v.reason and v.junit().all_passed, (v.reason, proc.stdout)


def test_a_conftest_that_flips_every_outcome_is_caught_by_the_canary(tmp_path):
    spec = ReportSpec.new()
    flip = """
        import pytest
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            out = yield
            rep = out.get_result()
            rep.outcome = "passed"
    """
    proc, data = _run_pytest(tmp_path, "def test_a():\n    assert False\n", spec, conftest=flip)
    v = judge(data, spec, expected=["test_t.py::test_a"], exit_code=proc.returncode)
    assert v.tampered and "must fail" in v.reason


def test_a_module_that_patches_pytests_reports_at_import_is_caught(tmp_path):
    spec = ReportSpec.new()
    proc, data = _run_pytest(tmp_path, """
        import _pytest.reports
        _orig = _pytest.reports.TestReport.from_item_and_call.__func__
        def _forged(cls, item, call):
            rep = _orig(cls, item, call)
            if "test_a" in item.nodeid:
                rep.outcome = "passed"
            return rep
        _pytest.reports.TestReport.from_item_and_call = classmethod(_forged)
        def test_a():
            assert False
    """, spec)
    v = judge(data, spec, expected=["test_t.py::test_a"], exit_code=proc.returncode)
    assert v.tampered and "replaced" in v.reason


def test_a_tampered_evaluation_is_counted_in_the_training_metrics():
    import asyncio

    from generate_with_swe_remote import reward_func as swe_reward
    from generate import reward_func as terminal_reward
    from slime.rollout.default_rollout import _reward_component_means
    from slime.utils.types import Sample

    def sample(meta):
        return Sample(metadata=meta)

    honest = {"accuracy": 1.0, "resolved": True, "evaluation": {"tampered": False}}
    forged = {"accuracy": 0.0, "resolved": False, "evaluation": {"tampered": True, "reason": "tampering: ..."}}
    for reward_func in (terminal_reward, swe_reward):
        samples = [sample(dict(honest)), sample(dict(forged))]
        rewards = asyncio.run(reward_func(None, samples))
        assert [r["tampered"] for r in rewards] == [0.0, 1.0] and rewards[1]["score"] == -1.0
        for s, r in zip(samples, rewards):
            s.reward = r
        assert _reward_component_means("rollout/reward", samples)["rollout/reward/tampered"] == 0.5


REPORTER = """
    class Reporter:  # writes its own report, decides nothing (as pytest-json-ctrf's reporter)
        def __init__(self):
            self.seen = []

        def pytest_runtest_logreport(self, report):
            self.seen.append(report.nodeid)
"""


def test_a_reporter_an_installed_plugin_registers_at_configure_is_the_environments(tmp_path):
    """pytest-json-ctrf registers its reporter from its entry point's pytest_configure: with autoload on (a task
    image's own plugins) that is not tampering."""
    site = tmp_path / "site"
    (site / "fakereport").mkdir(parents=True)
    (site / "fakereport" / "__init__.py").write_text(textwrap.dedent(REPORTER) + textwrap.dedent("""
        def pytest_configure(config):
            config.pluginmanager.register(Reporter(), name="fakereport_reporter")
    """))
    info = site / "fakereport-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakereport\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pytest11]\nfakereport = fakereport\n")
    spec = ReportSpec.new()
    proc, data = _run_pytest(tmp_path, "def test_a():\n    assert True\n", spec, site=site)
    v = judge(data, spec, expected=["test_t.py::test_a"], exit_code=proc.returncode)
    assert not v.reason and not v.tampered and v.junit().all_passed, (v.reason, proc.stdout[-2000:])


def test_a_reporter_a_conftest_registers_at_configure_is_foreign(tmp_path):
    """The same registration from a conftest.py (code the tests' folder holds: in SWE, the agent's repository) is
    named: only an installed plugin's own classes are the environment's."""
    spec = ReportSpec.new()
    conftest = textwrap.dedent(REPORTER) + textwrap.dedent("""
        def pytest_configure(config):
            config.pluginmanager.register(Reporter(), name="fakereport_reporter")
    """)
    proc, data = _run_pytest(tmp_path, "def test_a():\n    assert True\n", spec, conftest=conftest)
    v = judge(data, spec, expected=["test_t.py::test_a"], exit_code=proc.returncode)
    assert v.tampered and "fakereport_reporter" in v.reason, v.reason
