"""The repository store on a real project (inflection: the smallest sdist, the fastest suite): the commits are the
same on every rebuild, a shipped instance's base commit is rebuilt from the sdist and its patches, and a fresh
working tree holds the base commit only (not the fix, not the hidden tests, not the upstream history). The store is
cached under ~/.cache/slime/swe (SLIME_SWE_CACHE), so reruns take a second."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from slime.agentic.swe import repos
from slime.agentic.swe.check import DEFAULT_INSTANCES
from slime.agentic.swe.instances import load_instances
from slime.agentic.swe.projects import get_project

INFLECTION = get_project("inflection")
# the upstream commit of the inflection 0.5.1 sdist: fixed identity, date and message, so the same everywhere
INFLECTION_UPSTREAM = "e9c65354f7ee94455394e8e11b4bc080cccec46c"


@pytest.fixture(scope="module")
def instances():
    found = [i for i in load_instances(DEFAULT_INSTANCES) if i.repo == INFLECTION.repo]
    assert found, "no shipped inflection instance"
    return found


def git_out(tree, *args) -> str:
    return subprocess.run(["git", "-c", "safe.directory=*", "-C", str(tree), *args], capture_output=True, text=True,
                          check=False).stdout.strip()


def test_upstream_commit_is_the_pinned_one():
    assert repos.upstream_commit(INFLECTION) == INFLECTION_UPSTREAM


def test_a_rebuild_in_an_empty_cache_gives_the_same_commits(tmp_path, monkeypatch, instances):
    sdist = repos.fetch_sdist(INFLECTION)  # from the default cache (downloaded once)
    monkeypatch.setenv(repos.CACHE_ENV, str(tmp_path / "cache"))
    (tmp_path / "cache" / "sdists").mkdir(parents=True)
    shutil.copy(sdist, tmp_path / "cache" / "sdists" / sdist.name)
    assert repos.upstream_commit(INFLECTION) == INFLECTION_UPSTREAM
    for inst in instances:  # rebuilt from the upstream tree and the instance's two patches; the hash is checked
        store = repos.ensure_base_commit(inst)
        assert git_out(store, "--git-dir", str(store), "rev-parse", repos.instance_ref(inst.base_commit)) == inst.base_commit


def test_an_sdist_with_another_hash_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(repos.CACHE_ENV, str(tmp_path))
    (tmp_path / "sdists").mkdir()
    (tmp_path / "sdists" / INFLECTION.sdist).write_bytes(b"not the release")
    with pytest.raises(repos.RepoError, match="sha256"):
        repos.upstream_repo(INFLECTION)


def test_checkout_holds_the_base_commit_only(tmp_path, instances):
    inst = instances[0]
    tree = repos.checkout(inst, tmp_path / "testbed")
    assert git_out(tree, "rev-parse", "HEAD") == inst.base_commit
    assert git_out(tree, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git_out(tree, "log", "--format=%H") == inst.base_commit  # one root commit: no history to diff against
    assert git_out(tree, "status", "--porcelain") == ""
    # the upstream commit and the fixed source are not in the object database
    store = repos.upstream_repo(INFLECTION)
    fixed_blob = repos.git_out("rev-parse", f"{repos.UPSTREAM_REF}:inflection/__init__.py", git_dir=store)
    for obj in (INFLECTION_UPSTREAM, fixed_blob):
        assert subprocess.run(["git", "-c", "safe.directory=*", "-C", str(tree), "cat-file", "-e", obj],
                              capture_output=True).returncode != 0
    # the hidden tests are not in the working tree
    test_file = (tree / "test_inflection.py").read_text()
    for test in inst.FAIL_TO_PASS:
        function = test.split("::")[-1].split("[")[0]
        assert f"def {function}(" not in test_file
    assert "__pycache__/" in (tree / ".git" / "info" / "exclude").read_text()
    with pytest.raises(repos.RepoError, match="not empty"):
        repos.checkout(inst, tree)
