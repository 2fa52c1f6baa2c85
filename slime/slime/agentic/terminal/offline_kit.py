"""Terminal-Bench's test runners, offline: what a task's own `run-tests.sh` / `tests/test.sh` fetches from the network
to bootstrap pytest, provided inside its image instead, so the script runs unchanged in a container without network.

Terminal-Bench 1.x's standard run-tests.sh does `curl -LsSf https://astral.sh/uv/<version>/install.sh | sh`,
`source $HOME/.local/bin/env`, `uv init`, `uv add pytest==8.4.1`, `uv run pytest ...`; Harbor's verifiers run
`uvx --python 3.12 --with pytest==8.3.3 pytest ...`. The kit (`/opt/slime-offline` in every task image that
`task_images` builds) holds:

    bin/uv, bin/uvx      uv from its PyPI wheel (pinned), the same program astral.sh's installer would fetch
    bin/curl             a shim first on PATH: astral.sh's uv installer is answered from the kit (it installs the kit's
                         uv into $HOME/.local/bin and writes $HOME/.local/bin/env, as the real one does); any other
                         URL is passed to the real curl after a line on stderr naming it ("the tests run without
                         network"), so a script that needs more than its runner fails saying what it wanted
    wheels/              pytest's pinned versions, the report plugin Harbor's verifiers use (pytest-json-ctrf), and
                         every dependency any platform's resolution names (uv resolves for all platforms: colorama,
                         exceptiongroup, tomli ... too), from PyPI

and the image's environment says `UV_OFFLINE=1 UV_FIND_LINKS=/opt/slime-offline/wheels UV_PYTHON_DOWNLOADS=never`.
`uvx --python 3.12` needs a Python 3.12 on the image (uv finds system interpreters; it cannot download one here).
The kit is built once from PyPI into ~/.cache/slime/tb-offline/<hash of its pins> (`build_kit`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

KIT_DIR = "/opt/slime-offline"
UV_VERSION = "0.13.8"
PYTEST_VERSIONS = ("8.4.1", "8.3.3")  # what Terminal-Bench's and Harbor's standard scripts pin
# the report plugins verifiers name: Harbor's template runs `pytest --ctrf /logs/verifier/ctrf.json` with this pin
REPORT_PLUGINS = ("pytest-json-ctrf==0.3.5",)
# dependencies behind environment markers: uv resolves for every platform and Python, so the wheelhouse needs them
MARKER_DEPENDENCIES = ("colorama", "exceptiongroup", "tomli", "typing-extensions")
ENV = {"UV_OFFLINE": "1", "UV_FIND_LINKS": f"{KIT_DIR}/wheels", "UV_PYTHON_DOWNLOADS": "never",
       "UV_NO_PROGRESS": "1"}

CURL_SHIM = f"""#!/bin/bash
# slime offline kit: astral.sh's uv installer is served from {KIT_DIR}; anything else goes to the real curl after a
# line naming the URL (the tests run without network).
for arg in "$@"; do
    case "$arg" in
        https://astral.sh/uv/install.sh|https://astral.sh/uv/*/install.sh)
            cat {KIT_DIR}/uv-install.sh; exit 0 ;;
    esac
done
for arg in "$@"; do
    case "$arg" in
        http://*|https://*) echo "curl: $arg is not available offline (the tests run without network; {KIT_DIR} serves only uv's installer)" >&2 ;;
    esac
done
for real in /usr/bin/curl /bin/curl /usr/local/bin/curl; do
    [ -x "$real" ] && exec "$real" "$@"
done
echo "curl: not installed in this image" >&2
exit 127
"""

UV_INSTALLER = f"""#!/bin/sh
# slime offline kit: what astral.sh's installer does, from {KIT_DIR} (uv {UV_VERSION})
set -e
dest="${{XDG_BIN_HOME:-$HOME/.local/bin}}"
mkdir -p "$dest"
cp {KIT_DIR}/bin/uv {KIT_DIR}/bin/uvx "$dest/"
cat > "$dest/env" <<'EOF'
#!/bin/sh
case ":${{PATH}}:" in
    *:"$HOME/.local/bin":*) ;;
    *) export PATH="$HOME/.local/bin:$PATH" ;;
esac
EOF
echo "installing to $dest (uv {UV_VERSION}, offline)"
"""


def kit_key() -> str:
    pins = (f"uv=={UV_VERSION};pytest={','.join(PYTEST_VERSIONS)};extra={','.join(MARKER_DEPENDENCIES)};"
            f"plugins={','.join(REPORT_PLUGINS)}")
    return hashlib.sha256((pins + CURL_SHIM + UV_INSTALLER).encode()).hexdigest()[:16]


def default_cache() -> Path:
    return Path(os.environ.get("SLIME_TB_OFFLINE_DIR", Path.home() / ".cache" / "slime" / "tb-offline"))


def _pip_download(args: list[str], dest: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q",
                           "--only-binary", ":all:", "-d", str(dest), *args],
                          capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"pip download {' '.join(args)} failed: {proc.stderr.strip()[-1500:]}")


def build_kit(cache: Path | None = None) -> Path:
    """The kit's folder (built from PyPI the first time, then reused): bin/, wheels/, uv-install.sh."""
    root = (cache or default_cache()) / kit_key()
    if (root / "done").is_file():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kit-", dir=root.parent))
    try:
        (work / "bin").mkdir()
        wheels = work / "wheels"
        wheels.mkdir()
        download = work / "download"
        download.mkdir()
        _pip_download(["--no-deps", "--platform", "manylinux_2_17_x86_64", "--python-version", "3.12",
                       f"uv=={UV_VERSION}"], download)
        [uv_wheel] = list(download.glob("uv-*.whl"))
        with zipfile.ZipFile(uv_wheel) as wheel:
            for name in ("uv", "uvx"):
                member = f"uv-{UV_VERSION}.data/scripts/{name}"
                (work / "bin" / name).write_bytes(wheel.read(member))
                (work / "bin" / name).chmod(0o755)
        for version in PYTEST_VERSIONS:
            _pip_download(["--python-version", "3.12", f"pytest=={version}"], wheels)
        _pip_download(["--no-deps", *MARKER_DEPENDENCIES], wheels)
        _pip_download(["--python-version", "3.12", *REPORT_PLUGINS], wheels)
        (work / "bin" / "curl").write_text(CURL_SHIM)
        (work / "bin" / "curl").chmod(0o755)
        (work / "uv-install.sh").write_text(UV_INSTALLER)
        shutil.rmtree(download)
        (work / "done").write_text(kit_key() + "\n")
        work.chmod(0o755)  # mkdtemp's 0700 would be copied into the images: every user of the image reads the kit
        if root.exists():  # another process finished first
            shutil.rmtree(work)
        else:
            work.rename(root)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return root


def dockerfile_with_kit(image: str) -> str:
    """A Dockerfile adding the kit (the build context) to `image`: its runners first on PATH, uv offline."""
    env = " ".join(f"{k}={v}" for k, v in ENV.items())
    return f"FROM {image}\nCOPY . {KIT_DIR}\nENV {env} PATH={KIT_DIR}/bin:$PATH\n"


__all__ = ["CURL_SHIM", "ENV", "KIT_DIR", "PYTEST_VERSIONS", "UV_INSTALLER", "UV_VERSION", "build_kit",
           "dockerfile_with_kit", "kit_key"]
