"""A task's Dockerfile, read as instructions, and whether the bubblewrap sandbox can build the same environment.

    instructions = parse_dockerfile(text)                  # [Instruction(keyword, value, flags, line), ...]
    plan = sandbox_plan(task)                              # SandboxBuild, or raises NeedsDocker(reason)

The sandbox backend runs a task on this machine's own system, read-only, with the task's working directory at
/app, as an unprivileged uid, without network. A Dockerfile is built there only when everything it does can be
done that way: files copied into /app, ENV, WORKDIR /app, and RUN commands that exist on this machine, write only
under /app and need neither root nor the network. Anything else (installing packages, another working directory,
files outside /app, a multi-stage build, a remote ADD, a compose file with services) is refused with the reason, so
a task never runs in an environment other than its author's: `NeedsDocker("needs the Docker backend: ...")`. The
base image is the one thing the sandbox replaces: the machine's system stands in for it (that is what "a task the
sandbox allows" means; the Docker backend builds the real one).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

APP_DIR = "/app"

# programs that install software, manage users or services, or reach the network: the Docker backend's job
_NEEDS_ROOT_OR_NETWORK = {
    "apt", "apt-get", "aptitude", "dpkg", "apk", "yum", "dnf", "microdnf", "zypper", "pacman", "snap",
    "pip", "pip3", "pipx", "uv", "conda", "mamba", "micromamba", "npm", "npx", "yarn", "pnpm", "gem", "cargo",
    "go", "cpan", "cpanm", "Rscript", "R",
    "useradd", "adduser", "groupadd", "usermod", "chown", "chgrp", "passwd", "su", "sudo", "systemctl", "service",
    "update-alternatives", "locale-gen", "ldconfig", "mount",
    "curl", "wget", "git-lfs", "ssh", "scp", "rsync",
}
# shell syntax that is not a command name
_SHELL_WORDS = {"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "in",
                "{", "}", "(", ")", "!", "[[", "]]", "function", "select", "time"}
# shell builtins: no program to look for
_BUILTINS = {"cd", "export", "set", "unset", "true", "false", "exit", "source", ".", "umask", "test", "[", "echo",
             "printf", "read", "shift", "eval", "exec", "return", "local", "declare", "alias"}
_SEPARATORS = re.compile(r"\s*(?:&&|\|\||;|\||\n)\s*")
_VAR = re.compile(r"\$(?:\{(\w+)(?::?-([^}]*))?\}|(\w+))")


class DockerfileError(ValueError):
    """The Dockerfile does not parse (the message says where)."""


class NeedsDocker(Exception):
    """The task's environment cannot be built in the sandbox; the message says why (`needs the Docker backend: ...`)."""

    def __init__(self, reason: str):
        super().__init__(f"needs the Docker backend: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY, ...
    value: str  # the rest of the instruction, continuation lines joined, flags removed
    flags: dict[str, str] = field(default_factory=dict)  # --chown=..., --from=...
    json_args: tuple[str, ...] | None = None  # the exec (JSON array) form, when used
    line: int = 0  # 1-based line where it starts


@dataclass(frozen=True)
class SandboxBuild:
    """What the sandbox does to stand in for the image, in the Dockerfile's order: ("copy", (source in the build
    context, destination under /app)) and ("run", (working directory, shell command, environment at that point));
    `env` is the image's environment at the end (what the agent's shell would start with)."""

    steps: tuple[tuple[str, object], ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @property
    def copies(self) -> list[tuple[Path, str]]:
        return [arg for kind, arg in self.steps if kind == "copy"]

    @property
    def commands(self) -> list[str]:
        return [arg[1] for kind, arg in self.steps if kind == "run"]


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, instruction text) with backslash continuations joined and comments dropped."""
    escape = "\\"
    lines = text.splitlines()
    out: list[tuple[int, str]] = []
    buf, start = [], 0
    for number, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if not buf:
            directive = re.match(r"#\s*escape\s*=\s*(\S)", stripped)
            if directive and not out:
                escape = directive.group(1)
                continue
            if not stripped or stripped.startswith("#"):
                continue
            start = number
        elif stripped.startswith("#"):  # a comment inside a continued instruction is dropped
            continue
        if stripped.endswith(escape):
            buf.append(stripped[:-1].rstrip())
            continue
        buf.append(stripped)
        out.append((start, " ".join(part for part in buf if part)))
        buf = []
    if buf:
        out.append((start, " ".join(buf)))
    return out


def parse_dockerfile(text: str) -> list[Instruction]:
    instructions = []
    for line, logical in _logical_lines(text):
        keyword, _, rest = logical.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if "<<" in rest and keyword in ("RUN", "COPY") and re.search(r"<<-?\s*['\"]?\w+", rest):
            raise DockerfileError(f"line {line}: here-documents in {keyword} are not read here")
        flags = {}
        while rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            name, _, value = flag[2:].partition("=")
            flags[name] = value
            rest = rest.strip()
        json_args = None
        if rest.startswith("[") and keyword in ("RUN", "CMD", "ENTRYPOINT", "COPY", "ADD", "SHELL", "VOLUME"):
            try:
                parsed = json.loads(rest)
            except json.JSONDecodeError:
                parsed = None  # not JSON: the shell form, as Docker reads it
            if isinstance(parsed, list) and all(isinstance(a, str) for a in parsed):
                json_args = tuple(parsed)
        instructions.append(Instruction(keyword, rest, flags, json_args, line))
    if not instructions:
        raise DockerfileError("no instruction")
    return instructions


def _substitute(value: str, variables: dict[str, str]) -> str:
    def replace(match: re.Match) -> str:
        name = match.group(1) or match.group(3)
        default = match.group(2)
        return variables.get(name, default if default is not None else "")

    return _VAR.sub(replace, value)


def _env_pairs(value: str) -> dict[str, str]:
    """ENV a=1 b="2 3"  or the legacy  ENV a 1 2."""
    words = shlex.split(value)
    if words and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}
    pairs = {}
    for word in words:
        key, sep, val = word.partition("=")
        if not sep:
            raise DockerfileError(f"ENV {value!r}: {word!r} is not KEY=VALUE")
        pairs[key] = val
    return pairs


def command_names(script: str) -> list[str]:
    """The programs a shell command line runs (first word of each simple command; assignments and syntax skipped)."""
    names = []
    for part in _SEPARATORS.split(script):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            words = part.split()
        while words and (re.match(r"^\w+=", words[0]) or words[0] in _SHELL_WORDS):
            words = words[1:]
        if words:
            names.append(PurePosixPath(words[0]).name if words[0].startswith("/") else words[0])
    return names


def _inside_app(path: str, workdir: str) -> str | None:
    """`path` (absolute or relative to `workdir`) as a path under /app, or None when it is outside."""
    full = PurePosixPath(path if path.startswith("/") else f"{workdir}/{path}")
    parts = []
    for part in full.parts[1:]:
        if part == "..":
            if parts:
                parts.pop()
        elif part not in (".", ""):
            parts.append(part)
    normal = "/" + "/".join(parts)
    return normal if normal == APP_DIR or normal.startswith(APP_DIR + "/") else None


def sandbox_build(dockerfile: Path, context: Path, compose_file: Path | None = None) -> SandboxBuild:
    """The sandbox's stand-in for the image `dockerfile` builds from `context`; NeedsDocker when there is none."""
    if compose_file is not None:
        _check_compose(compose_file)
    try:
        instructions = parse_dockerfile(dockerfile.read_text(encoding="utf-8"))
    except DockerfileError as exc:
        raise NeedsDocker(f"{dockerfile.name}: {exc}") from None
    variables: dict[str, str] = {}
    env: dict[str, str] = {}
    workdir = "/"
    steps: list[tuple[str, object]] = []
    froms = 0
    for ins in instructions:
        where = f"{dockerfile.name} line {ins.line}"
        value = _substitute(ins.value, {**variables, **env})
        if ins.keyword == "FROM":
            froms += 1
            if froms > 1:
                raise NeedsDocker(f"{where}: a multi-stage build")
        elif ins.keyword == "ARG":
            name, _, default = value.partition("=")
            variables[name.strip()] = default.strip().strip('"')
        elif ins.keyword == "ENV":
            env.update(_env_pairs(value))
        elif ins.keyword == "WORKDIR":
            target = value if value.startswith("/") else f"{workdir}/{value}"
            if _inside_app(target, "/") is None:
                raise NeedsDocker(f"{where}: WORKDIR {value} (the sandbox's working directory is {APP_DIR})")
            workdir = _inside_app(target, "/")
        elif ins.keyword in ("COPY", "ADD"):
            steps.extend(_copy_steps(ins, value, context, workdir, where))
        elif ins.keyword == "RUN":
            script = " ".join(ins.json_args) if ins.json_args else value
            for name in command_names(script):
                if name in _NEEDS_ROOT_OR_NETWORK:
                    raise NeedsDocker(f"{where}: RUN {name} (installs software, needs root or reaches the network)")
                if name not in _BUILTINS and shutil.which(name) is None:
                    raise NeedsDocker(f"{where}: RUN {name}, which this machine does not have")
            if workdir == "/":
                raise NeedsDocker(f"{where}: RUN before any WORKDIR {APP_DIR} (it would run in /)")
            steps.append(("run", (workdir, script, dict(env))))
        elif ins.keyword in ("USER", "EXPOSE", "LABEL", "MAINTAINER", "STOPSIGNAL", "HEALTHCHECK", "VOLUME"):
            continue  # the sandbox runs as its own unprivileged uid; the rest describes the container, not files
        elif ins.keyword in ("CMD", "ENTRYPOINT"):
            raise NeedsDocker(f"{where}: {ins.keyword} (a process the container starts)")
        else:  # SHELL, ONBUILD, anything newer
            raise NeedsDocker(f"{where}: {ins.keyword}")
    return SandboxBuild(steps=tuple(steps), env=env)


def _copy_steps(ins: Instruction, value: str, context: Path, workdir: str, where: str) -> list[tuple[str, object]]:
    if "from" in ins.flags:
        raise NeedsDocker(f"{where}: COPY --from (a multi-stage build)")
    words = list(ins.json_args) if ins.json_args else shlex.split(value)
    if len(words) < 2:
        raise NeedsDocker(f"{where}: {ins.keyword} {value!r} names no destination")
    *sources, dest = words
    target = _inside_app(dest, workdir)
    if target is None:
        raise NeedsDocker(f"{where}: {ins.keyword} to {dest} (outside {APP_DIR}, which is all the sandbox can write)")
    steps = []
    root = context.resolve()
    for source in sources:
        if re.match(r"^[a-z]+://", source):
            raise NeedsDocker(f"{where}: ADD {source} (a download)")
        matches = sorted(root.glob(source.lstrip("/"))) if any(c in source for c in "*?[") else [root / source.lstrip("/")]
        for path in matches:
            resolved = path.resolve()
            if resolved != root and root not in resolved.parents:
                raise NeedsDocker(f"{where}: {ins.keyword} {source} reaches outside the build context")
            if not resolved.exists():
                raise NeedsDocker(f"{where}: {ins.keyword} {source}: not in the build context {context}")
            if ins.keyword == "ADD" and resolved.is_file() and re.search(r"\.(tar(\.\w+)?|tgz)$", resolved.name):
                raise NeedsDocker(f"{where}: ADD {source} (an archive Docker would unpack)")
            into = target.rstrip("/") + "/" + resolved.name if (dest.endswith("/") or len(matches) > 1
                                                                   or len(sources) > 1) else target
            steps.append(("copy", (resolved, into if resolved.is_file() else target)))
    return steps


def build_script(build: SandboxBuild, context_dir: str) -> str:
    """The bash script that performs `build` in the sandbox, the i-th copy's source staged at `context_dir`/i: each
    RUN as Docker runs it (`/bin/sh -c`, in its WORKDIR, with the ENV set so far), stopping at the first failure."""
    lines = ["set -e"]
    index = 0
    for kind, arg in build.steps:
        if kind == "copy":
            source, dest = arg
            staged = f"{context_dir}/{index}"
            index += 1
            if Path(source).is_dir():
                lines.append(f"mkdir -p {shlex.quote(dest)} && cp -R {shlex.quote(staged)}/. {shlex.quote(dest)}/")
            else:
                lines.append(f"mkdir -p {shlex.quote(str(PurePosixPath(dest).parent))} && "
                             f"cp {shlex.quote(staged)} {shlex.quote(dest)}")
        else:
            workdir, script, env = arg
            exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
            lines.append(f"mkdir -p {shlex.quote(workdir)} && (cd {shlex.quote(workdir)} && "
                         f"{'env ' + exports + ' ' if exports else ''}/bin/sh -c {shlex.quote(script)})")
    return "\n".join(lines) + "\n"


def _check_compose(compose_file: Path) -> None:
    import yaml

    try:
        data = yaml.safe_load(compose_file.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as exc:
        raise NeedsDocker(f"{compose_file.name} does not read: {exc}") from None
    services = data.get("services") or {}
    if len(services) > 1:
        raise NeedsDocker(f"{compose_file.name}: services {', '.join(sorted(services))} beside the agent's container")


__all__ = ["APP_DIR", "DockerfileError", "Instruction", "NeedsDocker", "SandboxBuild", "build_script", "command_names",
           "parse_dockerfile", "sandbox_build"]
