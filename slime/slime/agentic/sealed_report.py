"""Sealed grading, host side: the tests' results reach the host through a channel the agent's code cannot open,
forge or replace, and the host decides the score from facts it observed itself.

Why. A task's tests run code the agent wrote (a script it fixed, a package it patched) as the sandbox's uid. A
report file in a directory that uid can write can be rewritten by that code; so can anything it can ptrace or read
from ``/proc``. Here:

* **The channel** (:class:`ReportChannel`) is one end of a socket pair created by the host and handed to the test
  command as an inherited descriptor (``$SLIME_SEALED_FD``); the host keeps the other end. The pytest plugin
  (:mod:`slime.agentic.sealed_pytest`, staged read-only, loaded with ``-p slime_sealed_pytest`` before any test or
  package under test is imported) moves it to a close-on-exec descriptor, closes the inherited one and makes the
  test process non-dumpable, so no process the tests start inherits it, ptraces pytest, or opens its
  ``/proc/PID/fd``. No file is written and read back; no environment variable carries a secret.
* **The spec** the host writes into the channel before the command starts: a nonce and two **canary tests** with
  fresh random names (one must pass, one must fail), which the plugin adds after the task's own tests. Code that
  flips outcomes wholesale (a pytest hook in a patched package, a replaced ``TestReport``) flips a canary too.
* **The verdict** (:func:`judge`) reads the records and decides, from the host's own knowledge:

  - the **expected test ids**, known before the agent acted (the SWE instance's lists; a terminal task's ids as
    collected in its fresh workspace before the episode): a report with a missing, extra or renamed test scores as
    failed;
  - the **exit status** of the test command, observed by the host: one that disagrees with the report (0 with a
    failing test, non-zero with none) scores as failed;
  - **tampering**: data in the channel that is not the plugin's (a malformed line, a second session, a wrong
    nonce, records after the end), a canary with the wrong outcome or not run in a session that ran to its end, a
    case reported for a test that was never collected, a pytest internal replaced during the run, or a plugin
    registered after start-up that is not a conftest.py and implements a reporting hook. A tampered evaluation
    scores -1 and says so (``tampered``; ``rollout/reward/tampered`` in the training metrics).

What it does not guarantee: code of the agent's that runs *inside* the pytest process (a module the tests import)
can still, in principle, find the canaries in memory and flip only the other tests; the checks above raise the bar
(it must single out the canaries and leave pytest's functions and plugin list as they were), they do not make it
impossible. A command the task's ``run-tests.sh`` runs *before* pytest inherits the channel; a report it writes is
caught (a second session), but a task should not run agent code there.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slime.agentic.terminal.junit import CaseResult, JUnitReport

PLUGIN_MODULE = "slime_sealed_pytest"
PLUGIN_FILE = f"{PLUGIN_MODULE}.py"
ENV_FD = "SLIME_SEALED_FD"
MAX_REPORT_BYTES = 16 << 20  # a record per test phase is ~200 bytes: far more than any task's suite
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
_RECORD_TYPES = ("start", "collected", "collecterror", "case", "end")
# canary names read like a task's own tests
_WORDS = ("output", "result", "values", "format", "content", "summary", "files", "report", "config", "behaviour")


def plugin_source() -> Path:
    """The plugin's file, staged into the sandbox as :data:`PLUGIN_FILE`."""
    return Path(__file__).with_name("sealed_pytest.py")


@dataclass(frozen=True)
class ReportSpec:
    """What the host tells the plugin: a nonce, the mode (``run`` or ``collect``) and the canaries (name -> pass|fail)."""

    nonce: str
    mode: str = "run"
    canaries: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def new(cls, mode: str = "run") -> ReportSpec:
        if mode not in ("run", "collect"):
            raise ValueError(f"mode must be run or collect, not {mode!r}")
        canaries = {}
        if mode == "run":
            for expect in ("pass", "fail"):
                canaries[f"test_{secrets.choice(_WORDS)}_{secrets.token_hex(4)}"] = expect
        return cls(secrets.token_hex(16), mode, canaries)

    def encode(self) -> bytes:
        return json.dumps({"nonce": self.nonce, "mode": self.mode, "canaries": dict(self.canaries)}).encode()


class ReportChannel:
    """A socket pair: the spec is written into it at once; :attr:`inside_fd` goes to the test command
    (``pass_fds``) and :meth:`env` names it; the host's end is read in a thread until every holder of the inside end
    is gone. ``close_inside()`` once the command started (or failed to start), then :meth:`collect`."""

    def __init__(self, spec: ReportSpec):
        self.spec = spec
        host, inside = socket.socketpair()
        try:
            host.sendall(spec.encode())
            host.shutdown(socket.SHUT_WR)
        except BaseException:
            host.close()
            inside.close()
            raise
        self._host = host
        self.inside_fd: int | None = inside.detach()
        self._chunks: list[bytes] = []
        self._size = 0
        self.overflow = False
        self._reader = threading.Thread(target=self._read, name="sealed-report", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                chunk = self._host.recv(1 << 16)
                if not chunk:
                    return
                if self._size + len(chunk) > MAX_REPORT_BYTES:
                    self.overflow = True  # keep draining (a writer must not block), keep nothing more
                    continue
                self._chunks.append(chunk)
                self._size += len(chunk)
        except OSError:
            return

    def env(self) -> dict[str, str]:
        if self.inside_fd is None:
            raise RuntimeError("the channel's inside end was already closed")
        return {ENV_FD: str(self.inside_fd)}

    def close_inside(self) -> None:
        if self.inside_fd is not None:
            fd, self.inside_fd = self.inside_fd, None
            try:
                os.close(fd)
            except OSError:
                pass

    def collect(self, timeout: float = 10.0) -> bytes:
        """Everything the channel carried (the inside end must be closed here; the sandbox's processes are gone)."""
        self.close_inside()
        self._reader.join(timeout)
        if self._reader.is_alive():  # a holder of the inside end outlived the command: cut it off
            self.overflow = True
            try:
                self._host.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._reader.join(1.0)
        self._host.close()
        return b"".join(self._chunks)

    def close(self) -> None:
        self.close_inside()
        try:
            self._host.close()
        except OSError:
            pass


@dataclass(frozen=True)
class SealedReport:
    """The verdict on one run. ``cases``: the expected tests in order with their outcomes (empty when ``reason`` is
    set); ``reason``: why the run does not count (empty when it does); ``tampered``: the reason is tampering."""

    cases: tuple[CaseResult, ...] = ()
    reason: str = ""
    tampered: bool = False
    collected: tuple[str, ...] = ()
    canaries: dict = field(default_factory=dict)  # canary name -> outcome seen ("missing" if none)

    def junit(self) -> JUnitReport:
        """The same as a :class:`JUnitReport` (what the terminal reward and the SWE verdict read)."""
        return JUnitReport((), self.reason) if self.reason else JUnitReport(self.cases)

    def outcomes(self) -> dict[str, str]:
        return {c.name: c.outcome for c in self.cases}


class _Tampered(Exception):
    pass


def parse_records(data: bytes, spec: ReportSpec) -> tuple[list[dict], str]:
    """The plugin's records, checked for shape: ([records], "") or raises _Tampered; ([], reason) when the session
    did not start or did not end (not tampering: a crash, a kill, a timeout, a script that never ran pytest)."""
    records = []
    for n, line in enumerate(data.split(b"\n")):
        if not line:
            continue
        try:
            record = json.loads(line.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            raise _Tampered(f"line {n + 1} of the report channel is not the harness's (not its JSON)") from None
        if not isinstance(record, dict) or record.get("t") not in _RECORD_TYPES:
            raise _Tampered(f"line {n + 1} of the report channel is not a record of the harness's")
        records.append(record)
    if data and not data.endswith(b"\n"):
        raise _Tampered("the report channel ends in the middle of a line")
    starts = [r for r in records if r["t"] == "start"]
    ends = [r for r in records if r["t"] == "end"]
    if len(starts) > 1 or len(ends) > 1:
        raise _Tampered(f"the report channel carried {len(starts)} test sessions: only one pytest may report")
    if starts and records[0] is not starts[0]:
        raise _Tampered("records came through the report channel before the test session started")
    for r in starts + ends:
        if r.get("nonce") != spec.nonce:
            raise _Tampered("a record of the report channel carries the wrong nonce")
    if ends and records[-1] is not ends[0]:
        raise _Tampered("records came through the report channel after the test session ended")
    if not starts:
        return [], ("pytest did not report through the sealed channel (it did not run, or ran without "
                    f"-p {PLUGIN_MODULE})")
    if starts[0].get("mode", "run") != spec.mode:
        raise _Tampered("the test session ran in another mode than the host asked for")
    if not starts[0].get("sealed"):
        return [], "the harness could not make the test process non-dumpable (prctl failed): the run is not sealed"
    if not ends:
        return [], "the test session did not finish (killed, crashed or timed out before its end)"
    return records, ""


def _outcomes(records: Sequence[dict]) -> dict[str, str]:
    """node id -> the worst outcome over its phases, as the JUnit report gives it: a failed setup or teardown is an
    error, a failed call a failure, a skip (xfail included) a skip; a test whose setup passed but whose call never
    reported did not run (an error)."""
    out: dict[str, str] = {}
    phases: dict[str, set] = {}
    for r in records:
        if r["t"] != "case":
            continue
        nodeid, when, outcome = str(r.get("id")), r.get("when"), r.get("outcome")
        phases.setdefault(nodeid, set()).add(when)
        if outcome == "failed":
            value = "failed" if when == "call" else "error"
        elif outcome == "skipped":
            value = "skipped"
        else:
            value = "passed"
        if _RANK[value] >= _RANK.get(out.get(nodeid, "passed"), 0):
            out[nodeid] = value
    for nodeid, seen in phases.items():
        if "call" not in seen and out[nodeid] == "passed":
            out[nodeid] = "error"
    return out


def _canary_name(nodeid: str) -> str:
    return nodeid.rpartition("::")[2]


def judge(data: bytes, spec: ReportSpec, *, expected: Sequence[str], exit_code: int | None,
          timed_out: bool = False, overflow: bool = False) -> SealedReport:
    """The verdict on a ``run``-mode session (module docstring): the expected tests' outcomes, or why the run does
    not count, and whether it was tampered with."""
    if overflow:
        return SealedReport(reason=f"the report channel carried more than {MAX_REPORT_BYTES} bytes")
    try:
        return _judge(data, spec, list(expected), exit_code, timed_out)
    except _Tampered as e:
        return SealedReport(reason=f"tampering: {e}", tampered=True)


def _judge(data, spec, expected, exit_code, timed_out) -> SealedReport:
    records, problem = parse_records(data, spec)
    if timed_out:
        return SealedReport(reason="the tests timed out" + (f" ({problem})" if problem else ""))
    if problem:
        return SealedReport(reason=problem)
    end = records[-1]
    if end.get("replaced"):
        raise _Tampered(f"pytest's own functions were replaced during the run: {', '.join(map(str, end['replaced']))}")
    if end.get("foreign_plugins"):
        raise _Tampered("a pytest plugin that rewrites outcomes was registered during the run: "
                        + ", ".join(map(str, end["foreign_plugins"]))[:300])
    collected = [str(i) for r in records if r["t"] == "collected" for i in r.get("ids", ())]
    canary_ids = {i for i in collected if _canary_name(i) in spec.canaries}
    own = [i for i in collected if i not in canary_ids]
    outcomes = _outcomes(records)
    strangers = sorted(set(outcomes) - set(collected))
    if strangers:
        raise _Tampered(f"the report has results for tests that were never collected: {strangers[:3]}")
    # the plugin's own word that the session stopped early (-x, --maxfail) is not a fact the host observed: code in
    # pytest's process could claim it to excuse canaries it removed. So it only decides tampering or not; a run whose
    # canaries did not run never counts
    stopped_early = bool(end.get("stopped_early"))
    canaries = {}
    for name, expect in spec.canaries.items():
        ids = [i for i in canary_ids if _canary_name(i) == name]
        got = outcomes.get(ids[0], "missing") if len(ids) == 1 else "missing"
        canaries[name] = got
        if got == "missing":
            if stopped_early:
                return SealedReport(reason=f"the session stopped before the canary test that must {expect} ran "
                                           "(-x or --maxfail): the run does not count", collected=tuple(collected),
                                    canaries=canaries)
            raise _Tampered(f"the canary test that must {expect} did not run")
        if got != ("passed" if expect == "pass" else "failed"):
            raise _Tampered(f"the canary test that must {expect} was reported {got}")
    errors = [r for r in records if r["t"] == "collecterror"]
    if errors:
        return SealedReport(reason=f"collection failed: {errors[0].get('id')}: {str(errors[0].get('msg'))[-300:]}",
                            collected=tuple(own), canaries=canaries)
    missing = [t for t in expected if t not in own]
    extra = [t for t in own if t not in set(expected)]
    if missing or extra:
        what = "; ".join(p for p in (f"missing {missing[:3]}" if missing else "",
                                     f"not expected {extra[:3]}" if extra else "") if p)
        return SealedReport(reason=f"the run's tests are not the task's ({what})", collected=tuple(own),
                            canaries=canaries)
    cases = []
    for t in expected:
        outcome = outcomes.get(t)
        if outcome is None:  # collected, never run (the session stopped early)
            cases.append(CaseResult(name=t, outcome="error", message="did not run"))
        else:
            cases.append(CaseResult(name=t, outcome=outcome))
    failing = any(c.outcome in ("failed", "error") for c in cases)
    if exit_code is not None and failing == (exit_code == 0):
        return SealedReport(reason=(f"the test command exited with {exit_code}, which disagrees with its report "
                                    f"({'a test failed' if failing else 'no test failed'})"),
                            collected=tuple(own), canaries=canaries)
    return SealedReport(tuple(cases), collected=tuple(own), canaries=canaries)


def collected_ids(data: bytes, spec: ReportSpec, *, exit_code: int | None) -> tuple[tuple[str, ...], str]:
    """The test ids a ``collect``-mode session listed, or ((), why not)."""
    try:
        records, problem = parse_records(data, spec)
    except _Tampered as e:
        return (), f"the collection's report was not the harness's: {e}"
    if problem:
        return (), problem
    errors = [r for r in records if r["t"] == "collecterror"]
    if errors:
        return (), f"collection failed: {errors[0].get('id')}: {str(errors[0].get('msg'))[-500:]}"
    ids = tuple(str(i) for r in records if r["t"] == "collected" for i in r.get("ids", ()))
    if not ids:
        return (), f"no test was collected (exit status {exit_code})"
    return ids, ""


@dataclass(frozen=True)
class SealedRun:
    """One sealed test command: what the host observed (exit status, timeout, output tail) and what the channel
    carried (`report`, unparsed)."""

    exit_code: int | None
    timed_out: bool
    output: str
    report: bytes
    overflow: bool = False
    duration_s: float = 0.0


async def run_sealed(box, argv: Sequence[str], *, spec: ReportSpec, env: Mapping[str, str] | None = None,
                     cwd: str | None = None, limits=None, alongside: bool = False) -> SealedRun:
    """Run the test command `argv` in the sandbox `box` with a report channel: in the bubblewrap sandbox the host
    holds the channel and hands its inside end to the command (``pass_fds``); in a container a root supervisor
    holds it (:mod:`slime.agentic.sealed_supervisor`). The caller parses :attr:`SealedRun.report` with
    :func:`judge` or :func:`collected_ids`. `alongside` (containers only): beside the processes still running in
    it (DockerSandbox.run_sealed)."""
    start = time.monotonic()
    if box.isolation == "docker":
        got = await asyncio.to_thread(box.run_sealed, list(argv), spec=spec.encode(), env=env, cwd=cwd, limits=limits,
                                      report_cap=MAX_REPORT_BYTES, alongside=alongside)
        return SealedRun(got["exit"], bool(got["timed_out"]), got["output"], base64.b64decode(got["report"]),
                         bool(got["overflow"]), time.monotonic() - start)
    if alongside:
        raise ValueError("tests beside the agent's processes need a container (a bubblewrap command ends with its "
                         "pid namespace)")
    channel = ReportChannel(spec)
    try:
        result = await box.run(list(argv), env={**(env or {}), **channel.env()}, cwd=cwd, limits=limits,
                               pass_fds=(channel.inside_fd,))
    except BaseException:
        channel.close()
        raise
    channel.close_inside()
    data = await asyncio.to_thread(channel.collect)
    output = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr else "")
    return SealedRun(result.exit_code, result.timed_out, output, data, channel.overflow, time.monotonic() - start)


__all__ = ["ENV_FD", "MAX_REPORT_BYTES", "PLUGIN_FILE", "PLUGIN_MODULE", "ReportChannel", "ReportSpec",
           "SealedReport", "SealedRun", "collected_ids", "judge", "parse_records", "plugin_source", "run_sealed"]
