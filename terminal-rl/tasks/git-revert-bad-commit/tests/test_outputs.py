import subprocess
import sys

REPO = "/app/repo"
ORIGINAL_SUBJECTS = ["Document usage", "Update tax to 21%", "Change discount rate", "Add README", "Add price calculator"]


def git(*args):
    out = subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_one_new_commit_on_top_of_unchanged_history():
    subjects = git("log", "--format=%s", "main").splitlines()
    assert len(subjects) == 6 and subjects[1:] == ORIGINAL_SUBJECTS


def test_new_commit_only_touches_the_discount():
    assert len(git("log", "--format=%s", "main").splitlines()) == 6
    diff = git("show", "--format=", "-U0", "main")
    changed = [l for l in diff.splitlines() if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    assert sorted(changed) == ["+DISCOUNT = 0.10", "-DISCOUNT = 1.10"]


def test_program_prints_correct_totals_with_later_tax_change():
    assert len(git("log", "--format=%s", "main").splitlines()) == 6
    source = git("show", "main:prices.py")
    assert "TAX = 0.21" in source and "DISCOUNT = 0.10" in source
    out = subprocess.run([sys.executable, "prices.py"], cwd=REPO, capture_output=True, text=True, timeout=20)
    assert out.stdout.splitlines() == ["100 -> 108.9", "250 -> 272.25", "19.99 -> 21.77"]


def test_working_tree_clean():
    assert len(git("log", "--format=%s", "main").splitlines()) == 6
    assert git("status", "--porcelain") == ""
