"""The pytest side of sealed grading: a plugin that reports every test's outcome to the host through a socket the
harness handed to the test process, and to nothing else. The host side (the channel, the canaries, the verdict) is
:mod:`slime.agentic.sealed_report`; read its docstring for the design.

This file runs inside the sandbox, under the task's interpreter (the project's venv, or a Docker image's python3): it
imports only the standard library and pytest, and it is staged as the module ``slime_sealed_pytest`` (loaded with
``-p slime_sealed_pytest``). At import, before any test module or package under test is imported, it

1. takes the descriptor named by ``$SLIME_SEALED_FD`` (removed from the environment), moves it to a close-on-exec
   descriptor and closes the inherited one: no process the tests start gets it;
2. makes the process non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): a process of the same uid can then neither
   ptrace it nor open its ``/proc/PID/fd``, ``mem`` or ``environ`` (the kernel's ptrace access check), so a
   program the tests run cannot reach the descriptor or rewrite the results in memory;
3. reads the host's spec from the socket (the host wrote it and shut its side for writing): a nonce, the mode
   (``run`` or ``collect``: only list the test ids) and the canary tests' names.

Then it writes one JSON object per line: ``start``, ``collected`` (the node ids), ``collecterror``, one ``case`` per
test phase as pytest reports it (setup, call, teardown), and ``end`` with pytest's exit status. The canaries are
two test items it appends after collection in the last collected module (a random name each, one that must pass,
one that must fail); the failing one is not counted in pytest's failure count, so the exit status stays that of
the task's own tests, and it shows as ``canary`` in pytest's summary instead of as a failure.

It also watches the harness itself: pytest's reporting functions are snapshotted at import and compared at the end,
and a plugin registered after start-up that is not a ``conftest.py`` and implements a reporting hook is named in
the ``end`` record; the host scores either as tampering.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import socket
import sys

import _pytest.main
import _pytest.python
import _pytest.reports
import _pytest.runner
import pytest

ENV_FD = "SLIME_SEALED_FD"
MAX_SPEC_BYTES = 1 << 16
_PR_SET_DUMPABLE = 4
_FD_FLOOR = 200  # the channel moves to a descriptor at or above this, out of the way of the tests' own
# what a tampering package would replace to change outcomes; compared at import and at the end
_WATCHED = {
    "runner.call_and_report": (_pytest.runner, "call_and_report"),
    "runner.runtestprotocol": (_pytest.runner, "runtestprotocol"),
    "runner.CallInfo.from_call": (_pytest.runner.CallInfo, "from_call"),
    "reports.TestReport.from_item_and_call": (_pytest.reports.TestReport, "from_item_and_call"),
    "reports.TestReport.__init__": (_pytest.reports.TestReport, "__init__"),
    "python.Function.runtest": (_pytest.python.Function, "runtest"),
    "python.pytest_pyfunc_call": (_pytest.python, "pytest_pyfunc_call"),
    "main.Session.pytest_runtest_logreport": (_pytest.main.Session, "pytest_runtest_logreport"),
}
# hooks through which a plugin decides or rewrites what a test's outcome reads as
_REPORTING_HOOKS = ("pytest_runtest_makereport", "pytest_runtest_logreport", "pytest_runtest_call",
                    "pytest_runtest_protocol", "pytest_pyfunc_call", "pytest_report_teststatus",
                    "pytest_collection_modifyitems", "pytest_runtestloop", "pytest_sessionfinish")


def _static(owner, attr: str):
    """`attr` as stored (a classmethod read with getattr is a new bound method each time), without importing inspect."""
    for holder in (owner.__mro__ if isinstance(owner, type) else (owner,)):
        found = vars(holder).get(attr)
        if found is not None:
            return found
    return None


def _watched_now() -> dict:
    return {name: _static(owner, attr) for name, (owner, attr) in _WATCHED.items()}


_SNAPSHOT = _watched_now()


def _take_channel() -> tuple[socket.socket | None, dict, bool]:
    raw = os.environ.pop(ENV_FD, None)
    if raw is None:
        return None, {}, False
    inherited = int(raw)
    fd = fcntl.fcntl(inherited, fcntl.F_DUPFD_CLOEXEC, _FD_FLOOR)
    os.close(inherited)
    try:
        sealed = ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        sealed = False
    channel = socket.socket(fileno=fd)
    channel.set_inheritable(False)
    spec = b""
    while len(spec) <= MAX_SPEC_BYTES:
        chunk = channel.recv(4096)
        if not chunk:
            break
        spec += chunk
    try:
        return channel, json.loads(spec.decode()), sealed
    except ValueError:
        return channel, {}, sealed


_CHANNEL, _SPEC, _SEALED = _take_channel()
_CANARIES: dict[str, str] = dict(_SPEC.get("canaries") or {})  # name -> "pass" | "fail"
_state: dict = {"session": None, "plugins": None}


def _send(record: dict) -> None:
    if _CHANNEL is None:
        return
    try:
        _CHANNEL.sendall((json.dumps(record, ensure_ascii=True) + "\n").encode())
    except OSError:
        pass  # the host went away: nothing to report to


class SealedCanary(pytest.Item):
    """A test the host planted: it passes or fails as the spec says, whatever the code under test does."""

    def __init__(self, *, expect: str, **kwargs):
        super().__init__(**kwargs)
        self.expect = expect

    def runtest(self) -> None:
        if self.expect == "fail":
            raise AssertionError("sealed-grading canary: this test must fail")

    def repr_failure(self, excinfo, style=None):
        # a line, not a traceback: formatting one reads source files (~50 ms a run)
        return "sealed-grading canary: this test must fail"

    def reportinfo(self):
        return self.path, None, self.name


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config) -> None:
    if _CHANNEL is None:
        return
    if _SPEC.get("mode") == "collect":
        config.option.collectonly = True
    _state["plugins"] = {id(p) for p in config.pluginmanager.get_plugins()}
    _send({"t": "start", "nonce": _SPEC.get("nonce"), "pid": os.getpid(), "sealed": _SEALED,
           "mode": _SPEC.get("mode", "run")})


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session) -> None:
    _state["session"] = session
    known = _state["plugins"]
    if known is None:
        return
    # what an installed plugin (an entry point: the image's, with autoload on) registered while pytest configured
    # itself is the environment's, not the agent's: pytest-json-ctrf's reporter for `--ctrf`. Only an object of a
    # class its own package defines counts (a conftest's or the agent's class does not, even one naming that module).
    manager = session.config.pluginmanager
    packages = {getattr(module, "__name__", "").partition(".")[0] for module, _ in manager.list_plugin_distinfo()}
    for plugin in manager.get_plugins():
        if id(plugin) not in known and _defined_in(type(plugin), packages - {""}):
            known.add(id(plugin))


def _defined_in(cls: type, packages: set[str]) -> bool:
    module = sys.modules.get(getattr(cls, "__module__", "") or "")
    return (module is not None and cls.__module__.partition(".")[0] in packages
            and "." not in cls.__qualname__ and vars(module).get(cls.__qualname__) is cls
            and os.path.basename(getattr(module, "__file__", "") or "") != "conftest.py")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items) -> None:
    if _CHANNEL is None or _SPEC.get("mode") == "collect" or not _CANARIES:
        return
    parent = items[-1].parent if items else session
    for name, expect in _CANARIES.items():
        items.append(SealedCanary.from_parent(parent, name=name, expect=expect))


def pytest_collection_finish(session) -> None:
    _send({"t": "collected", "ids": [item.nodeid for item in session.items]})


def pytest_collectreport(report) -> None:
    if report.failed:
        _send({"t": "collecterror", "id": report.nodeid, "msg": str(report.longrepr)[-500:]})


def pytest_runtest_logreport(report) -> None:
    canary = report.nodeid.rpartition("::")[2] in _CANARIES
    # the message of a task's own failure only (rendering a traceback reads source files: ~20 ms for the canary's)
    message = report.longreprtext[-500:] if report.failed and not canary else ""
    _send({"t": "case", "id": report.nodeid, "when": report.when, "outcome": report.outcome,
           "xfail": hasattr(report, "wasxfail"), "msg": message})
    # pytest's Session counted the failing canary (its hook is tryfirst, this one runs after it): uncount it, so the
    # exit status stays that of the task's own tests
    session = _state["session"]
    if session is not None and report.failed and canary and _CANARIES[report.nodeid.rpartition("::")[2]] == "fail":
        session.testsfailed = max(0, session.testsfailed - 1)


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report, config):
    if report.when == "call" and report.nodeid.rpartition("::")[2] in _CANARIES:
        return "canary", "c", "CANARY"
    return None


def _foreign_plugins(config) -> list[str]:
    """Plugins registered after start-up that are not conftest.py files and implement a reporting hook."""
    known = _state["plugins"] or set()
    out = []
    for plugin in config.pluginmanager.get_plugins():
        if id(plugin) in known:
            continue
        if os.path.basename(getattr(plugin, "__file__", "") or "") == "conftest.py":
            continue
        if getattr(type(plugin), "__module__", "").startswith(("_pytest.", "pluggy.")):
            continue  # pytest's own objects (the session, the terminal reporter, ...)
        if any(hasattr(plugin, hook) for hook in _REPORTING_HOOKS):
            out.append(config.pluginmanager.get_name(plugin) or repr(plugin)[:200])
    return out


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus) -> None:
    if _CHANNEL is None:
        return
    changed = sorted(name for name, value in _watched_now().items() if value is not _SNAPSHOT[name])
    _send({"t": "end", "nonce": _SPEC.get("nonce"), "exitstatus": int(exitstatus),
           "stopped_early": bool(session.shouldfail or session.shouldstop),
           "replaced": changed, "foreign_plugins": _foreign_plugins(session.config)})
    try:
        _CHANNEL.shutdown(socket.SHUT_WR)
    except OSError:
        pass
