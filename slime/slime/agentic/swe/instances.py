"""SWE-bench's instance format, and JSONL that holds it.

One instance is one bug in one repository: the commit the agent starts from (``base_commit``), the issue text it is
given (``problem_statement``), the fix that is known to work (``patch``, never shown to the agent), the tests that
check the fix (``test_patch``, applied only at evaluation) and the pytest node ids that must pass afterwards:
``FAIL_TO_PASS`` (fail before the fix, pass after it) and ``PASS_TO_PASS`` (pass before and after).

The loader takes what users bring as well as what :mod:`.generate` writes, through one path:

* SWE-bench / SWE-bench Lite / SWE-Gym rows, where ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` are JSON *strings*
  holding a list (``"[\\"tests/test_x.py::test_y\\"]"``), or plain lists;
* the training-data shape of upstream's preprocessing, ``{"text": ..., "metadata": {"instance": {...}}}``
  (the instance is read from ``metadata.instance``; ``text`` is the problem statement again);
* keys the format does not name are kept in ``extra`` (e.g. SWE-Gym's ``eval_script``), and written back.

A malformed row raises :class:`InstanceFormatError` naming the file, the line and the field.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS", "test_patch",
            "patch")
OPTIONAL = ("version", "created_at", "hints_text", "environment_setup_commit", "image_name")
SHIPPED_INSTANCES = Path(__file__).resolve().parents[4] / "swe-rl" / "data" / "instances.jsonl"


class InstanceFormatError(ValueError):
    """A row is not a SWE-bench instance; the message names where (file:line) and which field."""


@dataclass(frozen=True)
class SweInstance:
    instance_id: str
    repo: str  # "owner/name" as on GitHub
    base_commit: str  # the commit the agent starts from (40 hex digits)
    problem_statement: str
    FAIL_TO_PASS: tuple[str, ...]  # pytest node ids
    PASS_TO_PASS: tuple[str, ...]
    test_patch: str  # unified git diff, applied at evaluation only
    patch: str  # the gold fix (unified git diff)
    version: str | None = None
    created_at: str | None = None
    hints_text: str | None = None
    environment_setup_commit: str | None = None
    image_name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # every other key of the row, kept as read

    @property
    def tests(self) -> tuple[str, ...]:
        """FAIL_TO_PASS then PASS_TO_PASS: exactly what the evaluation runs."""
        return self.FAIL_TO_PASS + self.PASS_TO_PASS

    def to_dict(self) -> dict[str, Any]:
        """The row as SWE-bench writes it (lists as lists; None fields left out; ``extra``'s keys at the top)."""
        row: dict[str, Any] = {}
        for name in REQUIRED + OPTIONAL:
            value = getattr(self, name)
            if value is None:
                continue
            row[name] = list(value) if isinstance(value, tuple) else value
        for key, value in self.extra.items():
            row.setdefault(key, value)
        return row


def _where(source: str, line: int | None) -> str:
    return f"{source}:{line}" if line is not None else source


def _test_list(value: Any, name: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):  # SWE-bench Lite and SWE-Gym: a JSON string holding the list
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise InstanceFormatError(f"{where}: field {name!r} is a string but not a JSON list ({e.msg})") from None
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise InstanceFormatError(f"{where}: field {name!r} must be a list of test ids (non-empty strings), "
                                  f"got {type(value).__name__}")
    return tuple(value)


def instance_from_dict(row: Mapping[str, Any], *, source: str = "<row>", line: int | None = None) -> SweInstance:
    """One instance from a row (a SWE-bench row, or upstream's ``{"text", "metadata": {"instance"}}`` shape)."""
    where = _where(source, line)
    if not isinstance(row, Mapping):
        raise InstanceFormatError(f"{where}: a row must be a JSON object, got {type(row).__name__}")
    if "instance_id" not in row and isinstance(row.get("metadata"), Mapping) and "instance" in row["metadata"]:
        inner = row["metadata"]["instance"]
        if not isinstance(inner, Mapping):
            raise InstanceFormatError(f"{where}: field 'metadata.instance' must be an object")
        row = inner
    values: dict[str, Any] = {}
    for name in REQUIRED:
        if name not in row:
            raise InstanceFormatError(f"{where}: missing field {name!r}")
        value = row[name]
        if name in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            values[name] = _test_list(value, name, where)
        elif not isinstance(value, str):
            raise InstanceFormatError(f"{where}: field {name!r} must be a string, got {type(value).__name__}")
        else:
            values[name] = value
    for name in ("instance_id", "repo", "base_commit"):
        if not values[name].strip():
            raise InstanceFormatError(f"{where}: field {name!r} is empty")
    for name in OPTIONAL:
        value = row.get(name)
        if value is not None and not isinstance(value, str):
            # SWE-bench writes version as a string ("3.0"); a number from a hand-written file is read as one
            if name == "version" and isinstance(value, (int, float)) and not isinstance(value, bool):
                value = str(value)
            else:
                raise InstanceFormatError(f"{where}: field {name!r} must be a string or null, got {type(value).__name__}")
        values[name] = value
    known = set(REQUIRED) | set(OPTIONAL)
    values["extra"] = {k: v for k, v in row.items() if k not in known}
    return SweInstance(**values)


def load_instances(path: str | os.PathLike, ids: Iterable[str] | None = None) -> list[SweInstance]:
    """Every instance of a JSONL file in file order (blank lines skipped), optionally only `ids` (each must exist).
    Duplicate instance ids are an error."""
    source = os.fspath(path)
    out: list[SweInstance] = []
    seen: dict[str, int] = {}
    with open(source, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as e:
                raise InstanceFormatError(f"{source}:{number}: not valid JSON ({e.msg} at column {e.colno})") from None
            inst = instance_from_dict(row, source=source, line=number)
            if inst.instance_id in seen:
                raise InstanceFormatError(f"{source}:{number}: field 'instance_id': {inst.instance_id!r} already "
                                          f"appears on line {seen[inst.instance_id]}")
            seen[inst.instance_id] = number
            out.append(inst)
    if ids is not None:
        wanted = list(dict.fromkeys(ids))
        by_id = {i.instance_id: i for i in out}
        missing = [i for i in wanted if i not in by_id]
        if missing:
            raise KeyError(f"{source}: no instance {', '.join(map(repr, missing))}")
        out = [by_id[i] for i in wanted]
    return out


def dumps_instance(instance: SweInstance) -> str:
    """One JSONL line (without the newline): keys in the format's order, non-ASCII kept, no trailing spaces, so the
    same instances always give the same bytes."""
    return json.dumps(instance.to_dict(), ensure_ascii=False, separators=(", ", ": "))


def save_instances(path: str | os.PathLike, instances: Iterable[SweInstance]) -> None:
    """Write JSONL (one instance per line, LF endings), atomically (a temporary file renamed over `path`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for inst in instances:
            f.write(dumps_instance(inst) + "\n")
    os.replace(tmp, path)


def as_training_row(instance: SweInstance, data_source: str = "slime_swe") -> dict[str, Any]:
    """Upstream's training-data shape: ``{"text": problem statement, "metadata": {"instance", "data_source"}}``."""
    return {"text": instance.problem_statement, "metadata": {"instance": instance.to_dict(), "data_source": data_source}}


def write_training_rows(instances_path: str | os.PathLike, out: str | os.PathLike,
                        ids: Iterable[str] | None = None) -> int:
    """Write the training rows (:func:`as_training_row`) of the instances of a JSONL file (all, or `ids` in that
    order) to `out`, for ``--prompt-data OUT --input-key text --metadata-key metadata``; returns how many."""
    rows = [as_training_row(inst) for inst in load_instances(instances_path, ids)]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Write the training rows of SWE instances (the trainer's prompt "
                                                 "data: --input-key text --metadata-key metadata).")
    parser.add_argument("--instances", type=Path, default=SHIPPED_INSTANCES, help="the instances (SWE-bench JSONL)")
    parser.add_argument("--out", type=Path, required=True, help="where to write the training rows")
    parser.add_argument("ids", nargs="*", help="instance ids (default: all, in the file's order)")
    opts = parser.parse_args(argv)
    n = write_training_rows(opts.instances, opts.out, opts.ids or None)
    print(f"{n} training rows -> {opts.out}")
    return 0


__all__ = [
    "OPTIONAL",
    "REQUIRED",
    "SHIPPED_INSTANCES",
    "InstanceFormatError",
    "SweInstance",
    "as_training_row",
    "dumps_instance",
    "instance_from_dict",
    "load_instances",
    "save_instances",
    "write_training_rows",
]


if __name__ == "__main__":
    raise SystemExit(main())
