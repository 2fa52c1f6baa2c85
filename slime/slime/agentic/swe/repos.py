"""The local repository store: one git repository per pinned project, rebuilt from its PyPI sdist, identical on
every machine, and fresh working trees of an instance at its base commit.

Where: ``$SLIME_SWE_CACHE`` (default ``~/.cache/slime/swe``) holds ``sdists/`` (the downloaded archives, checked
against the pinned sha256) and ``repos/<name>-<version>.git`` (bare repositories).

Why the hashes are the same everywhere: the upstream commit is the sdist's files (compiled bytecode left out) with
their executable bits, committed with a fixed author, committer, date and message, under a git configuration that
ignores the user's and the system's (``GIT_CONFIG_GLOBAL=/dev/null``, ``GIT_CONFIG_NOSYSTEM=1``). Same bytes in, same
commit out. An instance's base commit is made the same way, so its hash is reproducible too.

Why every base commit is a *root* commit (no parent): the agent gets a git repository, and a parent holding the
unbroken source, or the hidden tests, would hand it the answer (``git diff HEAD~1``). The base commit's tree is the
upstream tree with the bug in (the gold ``patch`` applied in reverse) and the hidden tests out (the ``test_patch``
applied in reverse); nothing else is in the store's refs for it. :func:`checkout` gives a working tree by
*fetching* that one ref into a new repository, so the working tree's object database holds the base commit's
objects and nothing more: not the upstream source, not the tests that check the fix, not other instances.

Everything here is plumbing on the host (no sandbox): the store only holds pinned, verified sdists and trees made
from them by the generator's patches.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

from .instances import SweInstance
from .projects import Project, get_project

CACHE_ENV = "SLIME_SWE_CACHE"
AUTHOR = ("slime-swe", "swe@slime.invalid")
DATE = "946684800 +0000"  # 2000-01-01T00:00:00Z: any fixed date; this one says "made up" plainly
UPSTREAM_REF = "refs/heads/upstream"
INSTANCE_REF_PREFIX = "refs/swe/"
# never part of a commit nor of an agent's diff (the sdists of some projects ship bytecode)
EXCLUDES = ("__pycache__/", "*.py[cod]", ".pytest_cache/")


class RepoError(RuntimeError):
    """The store could not be built, or an instance does not match it (wrong hash, a patch that does not apply)."""


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "slime" / "swe")


# ---------------------------------------------------------------------------------------------------- git


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A git environment that is the same on every machine: no user or system configuration, fixed identity and
    dates, C locale, no pager, no prompt."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C", "LC_ALL": "C", "TZ": "UTC",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": AUTHOR[0], "GIT_AUTHOR_EMAIL": AUTHOR[1], "GIT_AUTHOR_DATE": DATE,
        "GIT_COMMITTER_NAME": AUTHOR[0], "GIT_COMMITTER_EMAIL": AUTHOR[1], "GIT_COMMITTER_DATE": DATE,
        "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update(extra or {})
    return env


# -c options for every call: no hooks, no signing, no line-ending conversion, and trees owned by a sandbox uid are
# not refused as "dubious ownership" (the caller is root and created them)
_GIT_OPTS = ("-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", "-c", "core.autocrlf=false",
             "-c", "init.defaultBranch=main", "-c", "safe.directory=*", "-c", "advice.detachedHead=false")


def git(*args: str, cwd: str | os.PathLike | None = None, git_dir: str | os.PathLike | None = None,
        input: bytes | str | None = None, env: Mapping[str, str] | None = None, check: bool = True,
        timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Run git with the fixed environment; bytes out. Raises RepoError (with stderr) when `check` and it fails."""
    argv = ["git", *_GIT_OPTS]
    if git_dir is not None:
        argv += ["--git-dir", os.fspath(git_dir)]
    argv += list(args)
    data = input.encode() if isinstance(input, str) else input
    proc = subprocess.run(argv, cwd=cwd, input=data, capture_output=True, env=git_env(env), timeout=timeout,
                          check=False)
    if check and proc.returncode != 0:
        raise RepoError(f"git {' '.join(args[:3])} failed ({proc.returncode}): "
                        f"{proc.stderr.decode(errors='replace').strip()[-2000:]}")
    return proc


def git_out(*args: str, **kwargs) -> str:
    return git(*args, **kwargs).stdout.decode("utf-8", "surrogateescape").strip()


# ---------------------------------------------------------------------------------------------------- sdists


def sha256_of(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def _locked(name: str):
    """An exclusive lock of the cache (by name) across processes: two runs never build the same thing at once."""
    lock_dir = cache_root() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def fetch_sdist(project: Project) -> Path:
    """The project's sdist in the cache, downloaded with pip when missing; its sha256 must be the pinned one."""
    path = cache_root() / "sdists" / project.sdist
    with _locked(f"sdist-{project.key}"):
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
                proc = subprocess.run(
                    [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                     "--dest", tmp, project.requirement],
                    capture_output=True, text=True, check=False, timeout=600)
                got = Path(tmp) / project.sdist
                if proc.returncode != 0 or not got.exists():
                    raise RepoError(f"pip download {project.requirement} failed ({proc.returncode}): "
                                    f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
                os.replace(got, path)
        digest = sha256_of(path)
        if digest != project.sha256:
            raise RepoError(f"{path}: sha256 {digest} is not the pinned {project.sha256} of {project.requirement}; "
                            "remove the file to download it again")
    return path


def extract_sdist(archive: str | os.PathLike, dest: str | os.PathLike) -> None:
    """The archive's files under `dest` without its top folder (``name-version/``), compiled bytecode left out.
    Only regular files and folders are taken (links and devices are refused by the ``data`` filter or skipped)."""
    dest = Path(dest)
    with tarfile.open(archive, "r:*") as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) < 2 or not (member.isfile() or member.isdir()):
                continue
            rel = Path(*parts[1:])
            if "__pycache__" in rel.parts or rel.suffix in (".pyc", ".pyo"):
                continue
            member = tarfile.data_filter(member, str(dest)) if hasattr(tarfile, "data_filter") else member
            if member is None:
                continue
            target = dest / rel
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            data = tar.extractfile(member).read()
            target.write_bytes(data)
            os.chmod(target, 0o755 if member.mode & 0o100 else 0o644)


# ---------------------------------------------------------------------------------------------------- the store


def repo_path(project: Project) -> Path:
    return cache_root() / "repos" / f"{project.key}.git"


def commit_tree(repo: str | os.PathLike, tree: str, message: str) -> str:
    """A root commit of `tree` with the fixed identity and date: the same tree and message give the same hash."""
    return git_out("commit-tree", tree, "-m", message, git_dir=repo)


def base_message(project: Project) -> str:
    """The message of every base commit: the project and version, nothing about the bug."""
    return f"{project.name} {project.version}"


def upstream_repo(project: Project) -> Path:
    """The bare repository of the project (built once from the verified sdist, then reused)."""
    path = repo_path(project)
    with _locked(f"repo-{project.key}"):
        if path.exists() and git("rev-parse", "--verify", "-q", UPSTREAM_REF, git_dir=path, check=False).returncode == 0:
            return path
        archive = fetch_sdist(project)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp_repo = Path(tempfile.mkdtemp(prefix=f".{project.key}-", dir=path.parent))
        try:
            git("init", "-q", "--bare", str(tmp_repo))
            with tempfile.TemporaryDirectory(prefix="slime-swe-sdist-") as work:
                extract_sdist(archive, work)
                index = os.path.join(tmp_repo, "build-index")
                env = {"GIT_INDEX_FILE": index}
                git("--work-tree", work, "add", "-A", "-f", ".", git_dir=tmp_repo, cwd=work, env=env)
                tree = git_out("write-tree", git_dir=tmp_repo, env=env)
                os.unlink(index)
            message = f"{project.name} {project.version} as released on PyPI ({project.sdist}, sha256 {project.sha256})"
            commit = commit_tree(tmp_repo, tree, message)
            git("update-ref", UPSTREAM_REF, commit, git_dir=tmp_repo)
            if path.exists():
                shutil.rmtree(path)
            os.replace(tmp_repo, path)
        except BaseException:
            shutil.rmtree(tmp_repo, ignore_errors=True)
            raise
    return path


def upstream_commit(project: Project) -> str:
    return git_out("rev-parse", UPSTREAM_REF, git_dir=upstream_repo(project))


def tree_of(repo: str | os.PathLike, commit: str) -> str:
    return git_out("rev-parse", f"{commit}^{{tree}}", git_dir=repo)


def read_file(repo: str | os.PathLike, treeish: str, path: str) -> bytes:
    return git("cat-file", "blob", f"{treeish}:{path}", git_dir=repo).stdout


def list_files(repo: str | os.PathLike, treeish: str) -> list[str]:
    out = git("ls-tree", "-r", "-z", "--name-only", treeish, git_dir=repo).stdout.decode("utf-8", "surrogateescape")
    return [p for p in out.split("\0") if p]


def tree_with(repo: str | os.PathLike, treeish: str, changes: Mapping[str, bytes]) -> str:
    """The tree of `treeish` with the files of `changes` (path -> new content; existing paths, modes kept)."""
    with tempfile.TemporaryDirectory(prefix="slime-swe-index-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git("read-tree", treeish, git_dir=repo, env=env)
        for path, data in sorted(changes.items()):
            mode = git_out("ls-tree", treeish, "--", path, git_dir=repo).split(" ", 1)[0] or "100644"
            blob = git_out("hash-object", "-w", "--stdin", git_dir=repo, input=data)
            git("update-index", "--cacheinfo", f"{mode},{blob},{path}", git_dir=repo, env=env)
        return git_out("write-tree", git_dir=repo, env=env)


def diff_trees(repo: str | os.PathLike, old: str, new: str, paths: list[str] | tuple[str, ...] = ()) -> str:
    """The unified git diff from `old` to `new` (``diff --git a/... b/...``), limited to `paths` when given."""
    out = git("diff", "--no-color", "--no-renames", "--no-ext-diff", old, new, "--", *paths, git_dir=repo).stdout
    return out.decode("utf-8", "surrogateescape")


def export_tree(repo: str | os.PathLike, treeish: str, dest: str | os.PathLike) -> None:
    """Write the files of `treeish` into the existing directory `dest` (no .git)."""
    with tempfile.TemporaryDirectory(prefix="slime-swe-index-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git("--work-tree", os.fspath(dest), "read-tree", "--reset", "-u", treeish, git_dir=repo, env=env)


# ---------------------------------------------------------------------------------------------------- instances


def project_of(instance: SweInstance) -> Project:
    project = get_project(instance.repo)
    if instance.version is not None and instance.version != project.version:
        raise RepoError(f"{instance.instance_id}: {instance.repo} is pinned at {project.version}, the instance "
                        f"names version {instance.version}")
    return project


def instance_ref(base_commit: str) -> str:
    return f"{INSTANCE_REF_PREFIX}{base_commit}"


def base_tree_from_patches(repo: str | os.PathLike, upstream: str, patch: str, test_patch: str) -> str:
    """The upstream tree with `test_patch` and `patch` applied in reverse (the bug in, the hidden tests out)."""
    with tempfile.TemporaryDirectory(prefix="slime-swe-index-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git("read-tree", upstream, git_dir=repo, env=env)
        for name, text in (("test_patch", test_patch), ("patch", patch)):
            if not text.strip():
                continue
            proc = git("apply", "--cached", "-R", "--whitespace=nowarn", "-", git_dir=repo, env=env, input=text,
                       check=False)
            if proc.returncode != 0:
                raise RepoError(f"the instance's {name} does not reverse-apply to the upstream tree: "
                                f"{proc.stderr.decode(errors='replace').strip()[-1000:]}")
        return git_out("write-tree", git_dir=repo, env=env)


def ensure_base_commit(instance: SweInstance) -> Path:
    """Make sure the store holds the instance's base commit under its ref (rebuilt from the upstream tree and the
    instance's patches when missing; the rebuilt hash must equal ``base_commit``). Returns the store's path."""
    project = project_of(instance)
    repo = upstream_repo(project)
    ref = instance_ref(instance.base_commit)
    if git("rev-parse", "--verify", "-q", ref, git_dir=repo, check=False).returncode == 0:
        return repo
    with _locked(f"repo-{project.key}"):
        tree = base_tree_from_patches(repo, UPSTREAM_REF, instance.patch, instance.test_patch)
        commit = commit_tree(repo, tree, base_message(project))
        if commit != instance.base_commit:
            raise RepoError(f"{instance.instance_id}: rebuilt base commit {commit} is not the instance's "
                            f"{instance.base_commit} (a different sdist, or an instance made by another generator)")
        git("update-ref", ref, commit, git_dir=repo)
    return repo


def checkout(instance: SweInstance, dest: str | os.PathLike) -> Path:
    """A fresh git working tree of `instance` at its base commit in `dest` (created; must not exist or be empty),
    on branch ``main``. Its object database holds the base commit only (see the module docstring); bytecode and
    pytest caches are excluded from ``git add`` by ``.git/info/exclude``."""
    repo = ensure_base_commit(instance)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise RepoError(f"{dest} is not empty")
    git("init", "-q", str(dest))
    (dest / ".git" / "info").mkdir(exist_ok=True)
    (dest / ".git" / "info" / "exclude").write_text("".join(f"{p}\n" for p in EXCLUDES))
    git("fetch", "-q", "--no-tags", "--no-write-fetch-head", os.fspath(repo), instance_ref(instance.base_commit),
        cwd=dest)
    git("checkout", "-q", "-B", "main", instance.base_commit, cwd=dest)
    return dest


__all__ = [
    "CACHE_ENV",
    "RepoError",
    "base_message",
    "base_tree_from_patches",
    "cache_root",
    "checkout",
    "commit_tree",
    "diff_trees",
    "ensure_base_commit",
    "export_tree",
    "extract_sdist",
    "fetch_sdist",
    "git",
    "git_out",
    "list_files",
    "project_of",
    "read_file",
    "tree_of",
    "tree_with",
    "upstream_commit",
    "upstream_repo",
]
