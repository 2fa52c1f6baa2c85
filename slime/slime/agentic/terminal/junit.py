"""pytest's JUnit XML report -> per-test outcomes, totals and the terminal reward.

The reward is upstream's: ``accuracy = passed / total`` and ``reward = 2 * accuracy - 1`` (partial credit: 2 of
3 tests passing gives +0.33). It is read from the XML file that ``pytest --junitxml`` writes, never scraped from a
terminal screen. Whatever goes wrong (no file, an empty or malformed file, a report with no test case) the result
is a report with no cases, a ``reason`` in words and the reward -1; nothing raises.

Outcome of one ``<testcase>``: ``error`` if it has an ``<error>`` child (a setup/teardown error, or a collection
error, which pytest reports as a test case of its own), else ``failed`` with a ``<failure>`` child, else
``skipped`` with a ``<skipped>`` child (pytest also writes xfail this way), else ``passed``. A skipped test counts
in the total but not as passed: a test that did not run is no evidence that the task was solved.
"""

from __future__ import annotations

import errno
import os
import stat
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

OUTCOMES = ("passed", "failed", "error", "skipped")
MAX_REPORT_BYTES = 16 << 20  # a pytest report of a task's handful of tests is a few KiB
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}  # the worse outcome wins for a repeated test id


def pass_rate_reward(passed: int, total: int) -> float:
    """Upstream's outcome reward ``2 * passed / total - 1``; -1 when nothing ran (total 0)."""
    if total <= 0:
        return -1.0
    if not 0 <= passed <= total:
        raise ValueError(f"passed={passed} must lie in [0, total={total}]")
    return 2.0 * passed / total - 1.0


@dataclass(frozen=True)
class CaseResult:
    """One test case of the report."""

    name: str
    classname: str = ""
    outcome: str = "passed"  # one of OUTCOMES
    message: str = ""  # the failure/error/skip message (first 500 characters)
    time_s: float = 0.0

    @property
    def id(self) -> str:
        return f"{self.classname}::{self.name}" if self.classname else self.name


@dataclass(frozen=True)
class JUnitReport:
    """The parsed report. ``reason`` is empty when the report was read; otherwise it says why not (then
    ``cases`` is empty and the reward is -1)."""

    cases: tuple[CaseResult, ...] = ()
    reason: str = ""
    counts: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        counts = {o: 0 for o in OUTCOMES}
        for case in self.cases:
            counts[case.outcome] += 1
        object.__setattr__(self, "counts", counts)

    @property
    def passed(self) -> int:
        return self.counts["passed"]

    @property
    def failed(self) -> int:
        return self.counts["failed"]

    @property
    def errors(self) -> int:
        return self.counts["error"]

    @property
    def skipped(self) -> int:
        return self.counts["skipped"]

    @property
    def total(self) -> int:
        return len(self.cases)

    @property
    def accuracy(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def reward(self) -> float:
        return pass_rate_reward(self.passed, self.total)

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total

    def outcomes(self) -> dict[str, str]:
        """test id -> outcome."""
        return {c.id: c.outcome for c in self.cases}

    def summary(self) -> str:
        if self.reason:
            return f"no test results: {self.reason}"
        return (f"{self.passed}/{self.total} passed ({self.failed} failed, {self.errors} errors, "
                f"{self.skipped} skipped), reward {self.reward:+.3f}")


def _failed_report(reason: str) -> JUnitReport:
    return JUnitReport((), reason)


def _case(elem: ET.Element) -> CaseResult:
    outcome, message = "passed", ""
    for tag in ("error", "failure", "skipped"):  # error wins over failure (e.g. a failing test whose teardown errs)
        child = elem.find(tag)
        if child is not None:
            outcome = {"failure": "failed"}.get(tag, tag)
            message = child.get("message") or (child.text or "")
            break
    try:
        time_s = float(elem.get("time") or 0.0)
    except ValueError:
        time_s = 0.0
    return CaseResult(
        name=elem.get("name") or "",
        classname=elem.get("classname") or "",
        outcome=outcome,
        message=message.strip()[:500],
        time_s=time_s,
    )


def parse_junit_xml(data: str | bytes) -> JUnitReport:
    """Parse the text of a JUnit XML report (``<testsuites>`` or a single ``<testsuite>``)."""
    if isinstance(data, str):
        data = data.encode("utf-8", errors="replace")
    if not data.strip():
        return _failed_report("the JUnit XML report is empty (pytest did not finish?)")
    if len(data) > MAX_REPORT_BYTES:
        return _failed_report(f"the JUnit XML report is too large ({len(data)} bytes > {MAX_REPORT_BYTES})")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        return _failed_report(f"malformed JUnit XML ({e})")
    except Exception as e:  # expat's limits (entity expansion and the like): never let a report crash the caller
        return _failed_report(f"unreadable JUnit XML ({type(e).__name__}: {e})")
    if root.tag not in ("testsuites", "testsuite"):
        return _failed_report(f"not a JUnit report: the root element is <{root.tag}>, expected <testsuites> or <testsuite>")
    by_id: dict[tuple[str, str], CaseResult] = {}
    for elem in root.iter("testcase"):
        case = _case(elem)
        key = (case.classname, case.name)
        old = by_id.get(key)
        if old is None or _RANK[case.outcome] > _RANK[old.outcome]:
            by_id[key] = case
    if not by_id:
        return _failed_report("the JUnit XML report has no test case (no test was collected)")
    return JUnitReport(tuple(by_id.values()))


def report_of_file(path: str | os.PathLike, data: bytes | None, *, regular: bool = True) -> JUnitReport:
    """The report from what was found at `path` (on the host or in a container; written by sandboxed code): `data`,
    its first MAX_REPORT_BYTES + 1 bytes or more, None when there is no file; `regular` False when it is anything but
    a regular file (a symlink, a directory, a fifo), which is refused. A larger report is refused by
    :func:`parse_junit_xml`."""
    if data is None:
        return _failed_report(f"no JUnit XML report at {path} (the tests did not run, or did not finish)")
    if not regular:
        return _failed_report(f"the JUnit XML report {path} is not a regular file")
    return parse_junit_xml(data)


def read_junit_file(path: str | os.PathLike) -> tuple[JUnitReport, bytes]:
    """(the parsed report, the bytes read) at `path` on the host (:func:`report_of_file`): a symlink is not followed,
    and at most MAX_REPORT_BYTES + 1 bytes are read; the bytes are empty when no regular file was read."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return report_of_file(path, None), b""
    except OSError as e:
        if e.errno == errno.ELOOP:  # O_NOFOLLOW on a symlink
            return report_of_file(path, b"", regular=False), b""
        return _failed_report(f"cannot open the JUnit XML report {path}: {e.strerror or e}"), b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return report_of_file(path, b"", regular=False), b""
        with os.fdopen(fd, "rb") as f:
            fd = -1
            data = f.read(MAX_REPORT_BYTES + 1)
    except OSError as e:
        return _failed_report(f"cannot read the JUnit XML report {path}: {e.strerror or e}"), b""
    finally:
        if fd >= 0:
            os.close(fd)
    return report_of_file(path, data), data


def read_junit_xml(path: str | os.PathLike) -> JUnitReport:
    """The parsed report at `path` on the host (:func:`read_junit_file` without the bytes)."""
    return read_junit_file(path)[0]


__all__ = ["OUTCOMES", "CaseResult", "JUnitReport", "parse_junit_xml", "pass_rate_reward", "read_junit_file", "read_junit_xml",
           "report_of_file"]
