#!/usr/bin/env bash
# Make the local GUI desktops of gui-rl possible (slime/slime/agentic/gui/: Xvfb per lease in the sandbox, actions by
# pyautogui/xdotool, the OCR text view by tesseract, web apps in chromium).
#
#   bash scripts/setup_gui.sh                  # idempotent: does nothing when every tool is there
#   bash scripts/setup_gui.sh --osworld-apps   # also the apps OSWorld's tasks use (opt-in, ~1 GB installed)
#
# --osworld-apps installs Debian's LibreOffice (Calc, Impress, Writer), GIMP, VLC, Thunderbird, xterm (the terminal
# window OSWorld's tasks open), PulseAudio (a null sink the desktop's apps and volume settings use) and dbus-x11, only
# what is missing. Measured on Debian 12 here: see gui-rl/README.md,
# "OSWorld's own tasks".
# Installs Debian's xvfb, xdotool, tesseract-ocr (+ English), chromium and the DejaVu fonts with apt-get, only
# what is missing (root, or sudo without a password; scripts/apt_install.sh). Without them the GUI tests are skipped
# with the reason and the `gui` provider refuses to start a desktop.
set -euo pipefail

log() { echo "setup_gui: $*" >&2; }
pkgs=""
if [ "${1:-}" = --osworld-apps ]; then
    command -v soffice >/dev/null 2>&1 || pkgs="$pkgs libreoffice-calc libreoffice-impress libreoffice-writer"
    command -v gimp >/dev/null 2>&1 || pkgs="$pkgs gimp"
    command -v vlc >/dev/null 2>&1 || pkgs="$pkgs vlc"
    command -v thunderbird >/dev/null 2>&1 || pkgs="$pkgs thunderbird"
    command -v xterm >/dev/null 2>&1 || pkgs="$pkgs xterm"
    command -v dbus-launch >/dev/null 2>&1 || pkgs="$pkgs dbus-x11"
    command -v pactl >/dev/null 2>&1 || pkgs="$pkgs pulseaudio pulseaudio-utils"
elif [ -n "${1:-}" ]; then
    log "unknown option $1 (--osworld-apps or nothing)"
    exit 2
fi
command -v Xvfb >/dev/null 2>&1 || pkgs="$pkgs xvfb"
command -v xdotool >/dev/null 2>&1 || pkgs="$pkgs xdotool"
command -v tesseract >/dev/null 2>&1 || pkgs="$pkgs tesseract-ocr tesseract-ocr-eng"
command -v chromium >/dev/null 2>&1 || pkgs="$pkgs chromium"
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || pkgs="$pkgs fonts-dejavu-core"
if [ -z "$pkgs" ]; then
    exit 0
fi
# shellcheck disable=SC2086
bash "$(dirname "$0")/apt_install.sh" "the GUI desktops" $pkgs
for tool in Xvfb xdotool tesseract chromium; do
    command -v "$tool" >/dev/null 2>&1 || log "$tool is still missing: the GUI desktops cannot start"
done
