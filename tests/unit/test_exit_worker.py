"""A finished training process leaves through exit_worker: its exit work runs and its output arrives, its code kept."""

import subprocess
import sys
import textwrap



def test_exit_worker_runs_the_exit_work_flushes_and_keeps_the_code(tmp_path):
    marker = tmp_path / "atexit-ran"
    script = textwrap.dedent(f"""
        import atexit, sys
        from slime.backends.fsdp.parallel import exit_worker
        atexit.register(lambda: open({str(marker)!r}, "w").write("yes"))
        sys.stdout.write("buffered, no newline")
        sys.stderr.write("to stderr")
        exit_worker(3)
        print("never reached")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 3
    assert proc.stdout == "buffered, no newline"
    assert "to stderr" in proc.stderr
    assert marker.read_text() == "yes"
