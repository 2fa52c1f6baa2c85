"""Write the flag list of a package: `python -m slime.engine.known_flags sglang /tmp/pkgs/sglang-0.5.23-....whl`.

Without a path the installed distribution is read. The list goes to known_flags/<package>-<version>.txt
(replacing the list of another version of that package).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
from pathlib import Path

from slime.engine.known_flags import LISTS_DIR, SOURCES, extract_flags, render_list


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m slime.engine.known_flags")
    p.add_argument("package", choices=sorted(SOURCES))
    p.add_argument("path", nargs="?", default=None, help="a .whl or unpacked folder (default: the installed package)")
    p.add_argument("--version", default=None, help="version for the file name (default: from the wheel name or "
                                                   "the installed metadata)")
    args = p.parse_args()
    version = args.version
    if version is None and args.path and args.path.endswith(".whl"):
        version = Path(args.path).name.split("-")[1]
    if version is None:
        version = importlib.metadata.version(SOURCES[args.package].distribution)
    flags = extract_flags(args.package, args.path)
    if not flags:
        raise SystemExit(f"no flags found for {args.package} in {args.path or 'the installed package'}")
    for old in LISTS_DIR.glob(f"{args.package}-*.txt"):
        if re.fullmatch(rf"{re.escape(args.package)}-[0-9][^-]*\.txt", old.name):
            old.unlink()
    out = LISTS_DIR / f"{args.package}-{version}.txt"
    origin = Path(args.path).name if args.path else f"the installed {SOURCES[args.package].distribution}"
    out.write_text(render_list(args.package, version, flags, origin))
    print(f"{out}: {len(flags)} flags")


if __name__ == "__main__":
    main()
