"""Command-line flag names of the servers we launch (SGLang, sglang-router, vLLM), one list per pinned version.

The launch commands in `slime.engine.sglang_server`, `slime.engine.router` and `slime.engine.vllm_server` may
only use flags on these lists; tests check that. The lists are taken from the packages' own source with
`python -m slime.engine.known_flags <package> <installed package, wheel or unpacked folder>` (no import of the
package, which needs CUDA libraries), and a test re-extracts them whenever the package is installed.

Where the names come from (static reading of the source, see `extract_flags`):
  * sglang: `--name` strings passed to `add_argument` in `sglang/srt/server_args.py`, plus one flag per annotated
    field (`A[T, "help"]` / `A[T, Arg(...)]`) of the option namespaces in `sglang/srt/arg_groups/fields/`, which
    `ServerArgs.add_cli_args` registers as `--field-name` (or `Arg(cli_name=...)`, plus `Arg(aliases=...)`;
    `Arg(no_cli=True)` fields have no flag). Older SGLang versions register every flag in server_args.py.
  * sglang-router: `--name` strings (and `f"--{prefix}name"` with an empty prefix, as `launch_router` uses it)
    passed to `add_argument` in `sglang_router/router_args.py`.
  * vllm: `--name` strings passed to `add_argument` in `vllm/engine/arg_utils.py`, plus one `--field-name` per
    field of the frontend dataclasses in `vllm/entrypoints/common/cli_args.py` (registered through `get_kwargs`).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

LISTS_DIR = Path(__file__).parent  # where the committed <package>-<version>.txt lists live


@dataclass(frozen=True)
class FlagSource:
    """Which files of a package define its server flags, and how they are read."""

    distribution: str  # PyPI name
    add_argument_files: tuple[str, ...]  # literal add_argument("--x") calls
    field_files: tuple[str, ...] = ()  # annotated fields -> --field-name
    field_class_marker: str | None = None  # only classes assigning this name count (None: every class)
    sglang_arg_annotations: bool = False  # fields count only when annotated A[...] / Annotated[...]


SOURCES = {
    "sglang": FlagSource("sglang", ("sglang/srt/server_args.py",), ("sglang/srt/arg_groups/fields/",),
                         field_class_marker="_NS_PATH", sglang_arg_annotations=True),
    "sglang-router": FlagSource("sglang-router", ("sglang_router/router_args.py",)),
    "vllm": FlagSource("vllm", ("vllm/engine/arg_utils.py",), ("vllm/entrypoints/common/cli_args.py",),
                       field_class_marker=None),
}


# ------------------------------------------------------------------------------------------ committed lists

def list_path(package: str) -> Path:
    # the version must start with a digit, so that "sglang" does not match sglang-router-0.3.2.txt
    pattern = rf"{re.escape(package)}-\d[^-]*\.txt"
    matches = sorted(p for p in LISTS_DIR.glob(f"{package}-*.txt") if re.fullmatch(pattern, p.name))
    if len(matches) != 1:
        raise FileNotFoundError(f"expected one committed flag list {package}-<version>.txt in {LISTS_DIR}, "
                                f"found {[m.name for m in matches]}")
    return matches[0]


def pinned_version(package: str) -> str:
    return list_path(package).stem[len(package) + 1:]


def known_flags(package: str) -> frozenset[str]:
    """The committed flag names of `package` ("sglang", "sglang-router" or "vllm"); '#' lines are comments."""
    lines = list_path(package).read_text().splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def unknown_flags(package: str, argv: list[str]) -> list[str]:
    """The `--flags` in `argv` that the pinned version of `package` does not define (values are skipped)."""
    known = known_flags(package)
    names = [arg.split("=", 1)[0] for arg in argv if arg.startswith("--")]
    return [name for name in names if name not in known]


# ---------------------------------------------------------------------------------------------- extraction

def extract_flags(package: str, root: str | Path | None = None) -> set[str]:
    """Read the flag names of `package` from its source, without importing it.

    `root`: an unpacked folder (site-packages or an extracted wheel) or a `.whl` file; None reads the
    installed distribution through importlib.metadata.
    """
    source = SOURCES[package]
    files = _source_files(source, root)
    flags: set[str] = set()
    for rel in source.add_argument_files:
        flags |= _add_argument_flags(files[rel])
    for rel, text in files.items():
        if any(rel.startswith(prefix) if prefix.endswith("/") else rel == prefix for prefix in source.field_files):
            flags |= _field_flags(text, source)
    return flags


def _source_files(source: FlagSource, root) -> dict[str, str]:
    wanted = source.add_argument_files + source.field_files

    def keep(rel: str) -> bool:
        return rel.endswith(".py") and any(rel == w or (w.endswith("/") and rel.startswith(w)) for w in wanted)

    if root is None:
        dist = importlib.metadata.distribution(source.distribution)
        return {str(f): f.read_text() for f in dist.files or () if keep(str(f))}
    root = Path(root)
    if root.suffix == ".whl":
        with zipfile.ZipFile(root) as wheel:
            return {name: wheel.read(name).decode() for name in wheel.namelist() if keep(name)}
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*.py") if keep(str(p.relative_to(root)))}


def _add_argument_flags(text: str) -> set[str]:
    flags = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            for arg in node.args:
                name = _flag_literal(arg)
                if name:
                    flags.add(name)
    return flags


def _flag_literal(node) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("--"):
        return node.value
    # f"--{prefix}policy": launch_router registers the router flags with an empty prefix
    if isinstance(node, ast.JoinedStr) and node.values:
        parts = node.values
        if (isinstance(parts[0], ast.Constant) and parts[0].value == "--" and len(parts) == 3
                and isinstance(parts[1], ast.FormattedValue) and isinstance(parts[2], ast.Constant)):
            return "--" + parts[2].value
    return None


def _field_flags(text: str, source: FlagSource) -> set[str]:
    flags = set()
    for cls in (n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef)):
        assigned = {t.id for s in cls.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)}
        assigned |= {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
        if source.field_class_marker and source.field_class_marker not in assigned:
            continue
        for stmt in cls.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            name = stmt.target.id
            if name.startswith("_") or name.isupper():
                continue
            if source.sglang_arg_annotations:
                flags |= _sglang_field_flags(name, stmt.annotation)
            else:
                flags.add("--" + name.replace("_", "-"))
    return flags


def _sglang_field_flags(name: str, annotation) -> set[str]:
    """`A[T, "help"]` -> --name; `A[T, Arg(cli_name=..., aliases=[...], no_cli=...)]`; anything else: no flag."""
    if not (isinstance(annotation, ast.Subscript) and getattr(annotation.value, "id", None) in ("A", "Annotated")):
        return set()
    parts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
    meta = parts[1] if len(parts) > 1 else None
    if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
        return {"--" + name.replace("_", "-")}
    if not (isinstance(meta, ast.Call) and getattr(meta.func, "id", None) == "Arg"):
        return set()
    options = {kw.arg: kw.value for kw in meta.keywords}
    if isinstance(options.get("no_cli"), ast.Constant) and options["no_cli"].value is True:
        return set()
    cli_name = options.get("cli_name")
    flags = {cli_name.value if isinstance(cli_name, ast.Constant) else "--" + name.replace("_", "-")}
    aliases = options.get("aliases")
    if isinstance(aliases, ast.List | ast.Tuple):
        flags |= {e.value for e in aliases.elts if isinstance(e, ast.Constant) and str(e.value).startswith("--")}
    return flags


def render_list(package: str, version: str, flags: set[str], origin: str) -> str:
    header = [f"# {package} {version}: server flag names, extracted by `python -m slime.engine.known_flags`",
              f"# from {origin}", "# source files: " + ", ".join(SOURCES[package].add_argument_files
                                                             + SOURCES[package].field_files)]
    return "\n".join(header + sorted(flags)) + "\n"
