"""pytest's JUnit XML -> outcomes, totals and the terminal reward (slime.agentic.terminal.junit): real reports
written by pytest in a subprocess (passes, failures, errors, skips, xfail/xpass, a collection error), and reports
that are empty, malformed, hostile or missing (never an exception, always reward -1 with a reason)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from slime.agentic.terminal.junit import (
    MAX_REPORT_BYTES,
    CaseResult,
    JUnitReport,
    parse_junit_xml,
    pass_rate_reward,
    read_junit_xml,
)

MIXED = """
import pytest

def test_ok():
    assert 1 + 1 == 2

def test_also_ok():
    pass

def test_fails():
    assert "a" == "b", "letters differ"

@pytest.fixture
def broken():
    raise RuntimeError("fixture exploded")

def test_setup_error(broken):
    pass

@pytest.mark.skip(reason="not today")
def test_skipped():
    pass

@pytest.mark.xfail(reason="known bug")
def test_xfail():
    assert False

@pytest.mark.xfail(reason="fixed meanwhile")
def test_xpass():
    assert True
"""


def run_pytest(tmp_path, source: str, name: str = "test_sample.py"):
    test_file = tmp_path / name
    test_file.write_text(textwrap.dedent(source))
    xml = tmp_path / "junit.xml"
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", str(test_file)],
        cwd=tmp_path, env=env, capture_output=True, timeout=120,
    )
    return xml


def test_real_report_with_every_outcome(tmp_path):
    report = read_junit_xml(run_pytest(tmp_path, MIXED))
    assert report.reason == ""
    outcomes = {c.name: c.outcome for c in report.cases}
    assert outcomes == {
        "test_ok": "passed",
        "test_also_ok": "passed",
        "test_fails": "failed",
        "test_setup_error": "error",
        "test_skipped": "skipped",
        "test_xfail": "skipped",  # pytest writes an expected failure as <skipped>
        "test_xpass": "passed",  # a non-strict unexpected pass is a pass
    }
    assert (report.passed, report.failed, report.errors, report.skipped, report.total) == (3, 1, 1, 2, 7)
    assert report.reward == pytest.approx(2 * 3 / 7 - 1)
    assert report.accuracy == pytest.approx(3 / 7)
    assert not report.all_passed
    failing = next(c for c in report.cases if c.name == "test_fails")
    assert "letters differ" in failing.message and failing.classname == "test_sample"
    assert failing.id == "test_sample::test_fails"
    assert "fixture exploded" in next(c for c in report.cases if c.name == "test_setup_error").message
    assert report.outcomes()["test_sample::test_ok"] == "passed"
    assert "3/7 passed" in report.summary()


def test_real_report_all_passed(tmp_path):
    report = read_junit_xml(run_pytest(tmp_path, "def test_a():\n    pass\n\ndef test_b():\n    pass\n"))
    assert (report.passed, report.total, report.reward, report.all_passed) == (2, 2, 1.0, True)


def test_real_report_all_failed(tmp_path):
    report = read_junit_xml(run_pytest(tmp_path, "def test_a():\n    assert 0\n\ndef test_b():\n    assert 0\n"))
    assert (report.passed, report.failed, report.reward) == (0, 2, -1.0)


def test_collection_error_is_one_error_case(tmp_path):
    report = read_junit_xml(run_pytest(tmp_path, "import no_such_module_xyz\n\ndef test_a():\n    pass\n"))
    assert report.reason == ""
    assert (report.errors, report.total, report.reward) == (1, 1, -1.0)


def test_no_tests_collected_gives_minus_one_with_a_reason(tmp_path):
    report = read_junit_xml(run_pytest(tmp_path, "x = 1\n"))
    assert report.total == 0 and report.reward == -1.0
    assert "no test case" in report.reason


def test_teardown_error_after_a_failure_counts_once_as_error():
    xml = """<testsuites><testsuite name="pytest">
      <testcase classname="t" name="test_a"><failure message="boom"/><error message="teardown"/></testcase>
      <testcase classname="t" name="test_b"/>
      <testcase classname="t" name="test_b"><error message="teardown of b"/></testcase>
    </testsuite></testsuites>"""
    report = parse_junit_xml(xml)
    assert report.outcomes() == {"t::test_a": "error", "t::test_b": "error"}
    assert report.total == 2 and report.reward == -1.0


def test_single_testsuite_root_and_nested_suites():
    single = '<testsuite><testcase name="a"/><testcase name="b"><skipped/></testcase></testsuite>'
    assert (parse_junit_xml(single).passed, parse_junit_xml(single).total) == (1, 2)
    nested = '<testsuites><testsuite><testsuite><testcase name="deep"/></testsuite></testsuite></testsuites>'
    assert parse_junit_xml(nested).all_passed


def test_bad_time_attribute_is_tolerated():
    report = parse_junit_xml('<testsuite><testcase name="a" time="fast"/></testsuite>')
    assert report.cases == (CaseResult(name="a", outcome="passed", time_s=0.0),)


@pytest.mark.parametrize(
    "data, words",
    [
        ("", "empty"),
        ("   \n", "empty"),
        (b"", "empty"),
        ("<testsuites><testsuite><testcase name='a'>", "malformed"),
        ("this is not xml", "malformed"),
        ("<html><body>500</body></html>", "not a JUnit report"),
        ("<testsuites/>", "no test case"),
        (b"\xff\xfe<\x00t\x00", "malformed"),
    ],
)
def test_unusable_reports_give_minus_one_and_a_reason(data, words):
    report = parse_junit_xml(data)
    assert report.cases == () and report.total == 0
    assert report.reward == -1.0 and not report.all_passed
    assert words in report.reason
    assert report.summary().startswith("no test results")


def test_entity_expansion_bomb_does_not_escape():
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + "".join(f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10))
        + ']><testsuite><testcase name="&lol9;"/></testsuite>'
    )
    report = parse_junit_xml(bomb)  # expat refuses the amplification, or it is parsed within limits
    assert isinstance(report, JUnitReport)
    assert report.reward in (-1.0, 1.0)


def test_oversized_report_is_refused():
    report = parse_junit_xml(b"<testsuite>" + b" " * (MAX_REPORT_BYTES + 1) + b"</testsuite>")
    assert report.total == 0 and "too large" in report.reason


def test_missing_file(tmp_path):
    report = read_junit_xml(tmp_path / "nope.xml")
    assert report.reward == -1.0 and "no JUnit XML report" in report.reason


def test_symlink_and_directory_are_refused(tmp_path):
    real = tmp_path / "real.xml"
    real.write_text('<testsuite><testcase name="a"/></testsuite>')
    assert read_junit_xml(real).all_passed
    link = tmp_path / "link.xml"
    link.symlink_to(real)  # sandboxed code could point the report at a host file
    assert read_junit_xml(link).total == 0 and "not a regular file" in read_junit_xml(link).reason
    d = tmp_path / "dir.xml"
    d.mkdir()
    assert read_junit_xml(d).total == 0 and "not a regular file" in read_junit_xml(d).reason


def test_pass_rate_reward():
    assert pass_rate_reward(0, 0) == -1.0
    assert pass_rate_reward(0, 4) == -1.0
    assert pass_rate_reward(2, 4) == 0.0
    assert pass_rate_reward(2, 3) == pytest.approx(1 / 3)
    assert pass_rate_reward(5, 5) == 1.0
    with pytest.raises(ValueError):
        pass_rate_reward(6, 5)
