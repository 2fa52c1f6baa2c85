"""The VM side of a local desktop: OSWorld's VM server contract, served inside the lease's sandbox.

Started by :class:`slime.agentic.gui.desktop.LocalDesktop` as the sandbox's one long-lived process (stdlib and PIL
only, so it runs in any sandbox that has the project's interpreter): it starts ``Xvfb`` on display ``:0`` (the
sandbox's own /tmp and network namespace make that display private to the lease), optionally a window manager,
then answers HTTP on a unix socket that the host reaches through a bound directory (the sandbox has no network).
Every process it starts (apps, commands) dies with the sandbox.

The routes and their bodies are OSWorld's (``desktop_env/server/main.py``), so one client drives this desktop and an
OSWorld VM alike:

| route | request | reply |
|---|---|---|
| GET `/screenshot` | | PNG bytes of the whole screen |
| POST `/execute`, `/setup/execute` | `{command: [argv] or str, shell: bool, timeout?}` | `{status, output, error, returncode}`; a command past its timeout (default 120 s) is killed with everything it started: `{status: "error", message}` and 500 |
| POST `/setup/launch` | `{command, shell}` | text; the app runs on, detached |
| POST `/screen_size` | | `{width, height}` |
| GET `/cursor_position` | | `[x, y]` |
| GET `/platform` | | `Linux` |
| POST `/file` | form `file_path` | the file's bytes; 404 `{error}` |
| POST `/setup/upload` | multipart `file_path`, `file_data` | text |
| POST `/list_directory` | `{path}` | `{directory_tree}` |
| POST `/desktop_path` | | `{desktop_path}` |
| POST `/setup/open_file` | `{path, window_name?, timeout_seconds?}` | text once a window whose name holds the file's name shows (the opener: `SLIME_GUI_OPENERS`) |
| POST `/setup/activate_window`, `/setup/close_window` | `{window_name, strict?, by_class?}` | text; 404 when no window matches |
| GET `/accessibility` | | `{AT: xml}`: here a text view of the screen read by OCR (tesseract on the screenshot at twice its size: one `<text>` per element, a line's words split where a wide gap parts a label from its field, with its box), not an accessibility tree (a bare X server has none) |
| GET `/healthz` | | `ok` (ours) |

Where PulseAudio is installed, the desktop has a sound server with its null sink (half volume at the start). With
``--terminal-shortcut``, as on OSWorld's Ubuntu image, Ctrl+Alt+T opens a terminal window (``xterm`` or
``x-terminal-emulator``, in the home directory): many of OSWorld's tasks and agents start one that way. The server grabs the key on the display itself
(python-xlib, which pyautogui brings), since the desktop runs no window manager by default.

Not served: recording, wallpaper, `/terminal`, `/run_python`, `/run_bash_script`, `/setup/download_file` (no
network inside).
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import io
import json
import os
import shlex
import shutil
import signal
import socket
import socketserver
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from xml.sax.saxutils import quoteattr

DISPLAY = ":0"
EXECUTE_TIMEOUT_S = 120.0  # OSWorld's subprocess timeout
MAX_BODY_BYTES = 64 << 20
_children: list[subprocess.Popen] = []  # launched apps: killed with the server (the sandbox sweeps the rest)
_lock = threading.Lock()


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        request, _ = super().get_request()
        return request, ("local", 0)  # BaseHTTPRequestHandler logs a (host, port) pair


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["DISPLAY"] = DISPLAY
    return env


def run_command(command, shell: bool, timeout: float) -> dict:
    """Run a command to completion in its own process group; past `timeout` the group is killed."""
    if isinstance(command, str) and not shell:
        command = shlex.split(command)
    if not shell:
        command = [os.path.expanduser(a) if isinstance(a, str) and a.startswith("~/") else a for a in command]
    proc = subprocess.Popen(command, shell=shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", env=_env(), start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        raise TimeoutError(f"the command did not finish within {timeout:g} s and was killed")
    return {"status": "success", "output": out, "error": err, "returncode": proc.returncode}


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def launch(command, shell: bool, cwd: str | None = None) -> None:
    if isinstance(command, str) and not shell:
        command = shlex.split(command)
    proc = subprocess.Popen(command, shell=shell, env=_env(), cwd=cwd, start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with _lock:
        _children.append(proc)


def windows(name: str, *, by_class: bool = False, strict: bool = False) -> list[str]:
    """Visible X window ids whose name (or class) holds `name` (xdotool matches case-insensitively); `strict`: the
    whole name."""
    pattern = _regex_escape(name)
    args = ["xdotool", "search", "--onlyvisible", "--class" if by_class else "--name",
            f"^{pattern}$" if strict else pattern]
    return subprocess.run(args, capture_output=True, text=True, env=_env(), timeout=10).stdout.split()


def _regex_escape(text: str) -> str:
    return "".join("\\" + c if c in ".^$*+?()[]{}|\\" else c for c in text)


def screenshot_png() -> bytes:
    from PIL import ImageGrab

    buf = io.BytesIO()
    ImageGrab.grab(xdisplay=DISPLAY).save(buf, format="PNG", compress_level=1)  # speed over size: a local socket
    return buf.getvalue()


def screen_size() -> tuple[int, int]:
    from PIL import ImageGrab

    return ImageGrab.grab(xdisplay=DISPLAY).size


# The screenshot is read at twice its size: at 1x tesseract dropped short lines ("lemons" between two others in the
# notes editor), clipped words at a widget's border ("guage" for "Language") and read an entry's text as part of its
# label ("Display name [Sam"), which left a text policy nothing to click for the field and no way to read its value;
# at 2x all three read (measured on the Tk apps; ~0.25 s more per view on 2 cores).
OCR_SCALE = 2
# A gap between two words wider than this many times the line's median word height ends an element: a label and
# the field beside it are two things to click, not one line whose centre is neither (measured on the Tk apps at 2x:
# gaps inside a phrase 0.4-0.9 heights, "Display name" to its entry's text 1.7).
OCR_ELEMENT_GAP = 1.2
# what a widget's border reads as at the edge of the text inside it ("|Sam" for an entry holding "Sam")
BORDER_GLYPHS = "|["


def ocr_elements(tsv: str, scale: int = 1, min_confidence: float = 30.0) -> list[tuple[int, int, int, int, str]]:
    """(x, y, w, h, text) of each text element in tesseract's TSV of a screenshot read at `scale` times its size (boxes
    given back in screen pixels), top to bottom: the words of one tesseract line, split where a gap is wider than
    OCR_ELEMENT_GAP line heights, a border read at an element's edge left out."""
    lines: dict[tuple, list] = {}
    for row in tsv.splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or not cols[11].strip():
            continue
        try:
            if float(cols[10] or -1) < min_confidence:
                continue
            box = [int(c) for c in cols[6:10]]
            key = tuple(int(c) for c in cols[2:5])  # block, paragraph, line
        except ValueError:
            continue
        lines.setdefault(key, []).append((*box, cols[11].strip()))
    elements = []
    for words in lines.values():
        words.sort()
        height = statistics.median(w[3] for w in words)
        group = [words[0]]
        for word in words[1:]:
            if word[0] - (group[-1][0] + group[-1][2]) > OCR_ELEMENT_GAP * height:
                elements.append(group)
                group = []
            group.append(word)
        elements.append(group)
    out = []
    for group in elements:
        x0, y0 = min(w[0] for w in group), min(w[1] for w in group)
        x1, y1 = max(w[0] + w[2] for w in group), max(w[1] + w[3] for w in group)
        text = " ".join(w[4] for w in group)
        text = text.lstrip(BORDER_GLYPHS).rstrip(BORDER_GLYPHS.replace("[", "]")).strip() or text
        out.append((x0 // scale, y0 // scale, -(-(x1 - x0) // scale), -(-(y1 - y0) // scale), text))
    return sorted(out, key=lambda e: (e[1], e[0]))


def ocr_view() -> str:
    """The screen as OCR text elements with boxes (tesseract TSV), as an XML tree like OSWorld's accessibility
    reply."""
    from PIL import Image

    png = screenshot_png()
    if OCR_SCALE != 1:
        with Image.open(io.BytesIO(png)) as img:
            big = img.convert("RGB").resize((img.width * OCR_SCALE, img.height * OCR_SCALE), Image.Resampling.LANCZOS)
        buf = io.BytesIO()
        big.save(buf, format="PNG", compress_level=1)
        png = buf.getvalue()
    tsv = subprocess.run(["tesseract", "stdin", "stdout", "--psm", "11", "tsv"], input=png, capture_output=True,
                         timeout=60, env=_env()).stdout.decode("utf-8", "replace")
    out = ['<desktop-frame source="ocr">']
    for x, y, w, h, text in ocr_elements(tsv, OCR_SCALE):
        out.append(f'<text x="{x}" y="{y}" w="{w}" h="{h}" name={quoteattr(text)}/>')
    out.append("</desktop-frame>")
    return "\n".join(out)


def directory_tree(path: str, depth: int = 0) -> dict:
    tree = {"type": "directory", "name": os.path.basename(path), "children": []}
    try:
        for entry in sorted(os.listdir(path)):
            full = os.path.join(path, entry)
            if os.path.isdir(full) and not os.path.islink(full) and depth < 20:
                tree["children"].append(directory_tree(full, depth + 1))
            else:
                tree["children"].append({"type": "file", "name": entry})
    except OSError as e:
        return {"error": str(e)}
    return tree


def _openers() -> dict[str, list[str]]:
    """File suffix -> argv prefix for /setup/open_file (``SLIME_GUI_OPENERS``: a JSON object set by the desktop)."""
    try:
        value = json.loads(os.environ.get("SLIME_GUI_OPENERS") or "{}")
    except ValueError:
        return {}
    return {k.lower(): v for k, v in value.items() if isinstance(v, list) and all(isinstance(a, str) for a in v)}


class Handler(BaseHTTPRequestHandler):
    server_version = "slime-gui-vm/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the pool server logs the calls
        pass

    # -- replies

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, value, status: int = 200) -> None:
        self._send(status, json.dumps(value).encode(), "application/json")

    def _text(self, text: str, status: int = 200) -> None:
        self._send(status, text.encode(), "text/plain; charset=utf-8")

    # -- requests

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise ValueError(f"body over {MAX_BODY_BYTES} bytes")
        return self.rfile.read(length) if length else b""

    def _data(self) -> dict:
        body = self._body()
        ctype = self.headers.get("Content-Type", "")
        if ctype.startswith("multipart/form-data"):
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
            fields = {}
            for part in msg.iter_parts():
                name = part.get_param("name", header="content-disposition")
                if name:
                    fields[name] = part.get_payload(decode=True) if part.get_filename() else \
                        part.get_payload(decode=True).decode("utf-8", "replace")
            return fields
        if ctype.startswith("application/x-www-form-urlencoded"):
            return {k: v[-1] for k, v in urllib.parse.parse_qs(body.decode("utf-8", "replace")).items()}
        if not body:
            return {}
        value = json.loads(body)
        if not isinstance(value, dict):
            raise ValueError("the body must be a JSON object")
        return value

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def _route(self, method: str) -> None:
        path = urllib.parse.urlsplit(self.path).path
        handler = ROUTES.get((method, path))
        if handler is None:
            self._json({"status": "error", "message": f"no route {method} {path}"}, 404)
            return
        try:
            handler(self)
        except Exception as e:  # the reply says what went wrong; the server stays up
            try:
                self._json({"status": "error", "message": f"{type(e).__name__}: {e}"}, 500)
            except OSError:
                pass


def _execute(h: Handler) -> None:
    data = h._data()
    shell = bool(data.get("shell", False))
    command = data.get("command", "" if shell else [])
    timeout = float(data.get("timeout") or EXECUTE_TIMEOUT_S)
    h._json(run_command(command, shell, min(timeout, 3600.0)))


def _launch(h: Handler) -> None:
    data = h._data()
    shell = bool(data.get("shell", False))
    command = data.get("command", "" if shell else [])
    launch(command, shell)
    h._text(f"{command if shell else ' '.join(command)} launched successfully")


def _file(h: Handler) -> None:
    path = h._data().get("file_path")
    if not path:
        h._json({"error": "file_path is required"}, 400)
        return
    path = os.path.expandvars(os.path.expanduser(path))
    if not os.path.isfile(path):
        h._json({"error": "File not found"}, 404)
        return
    with open(path, "rb") as f:
        h._send(200, f.read(), "application/octet-stream")


def _upload(h: Handler) -> None:
    data = h._data()
    path, content = data.get("file_path"), data.get("file_data")
    if not path or content is None:
        h._json({"error": "file_path and file_data are required"}, 400)
        return
    path = os.path.expandvars(os.path.expanduser(path))
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(content if isinstance(content, bytes) else content.encode())
    h._text(f"File Uploaded: {os.path.getsize(path)} bytes")


def _list_directory(h: Handler) -> None:
    path = h._data().get("path")
    if not path:
        h._json({"error": "Missing 'path' parameter"}, 400)
    elif not os.path.isdir(os.path.expanduser(path)):
        h._json({"error": "The provided path is not a directory"}, 400)
    else:
        h._json({"directory_tree": directory_tree(os.path.expanduser(path))})


def _desktop_path(h: Handler) -> None:
    path = os.path.join(os.path.expanduser("~"), "Desktop")
    os.makedirs(path, exist_ok=True)
    h._json({"desktop_path": path})


def _open_file(h: Handler) -> None:
    data = h._data()
    path = data.get("path")
    if not path:
        h._text("Path not supplied!", 400)
        return
    path = os.path.expandvars(os.path.expanduser(path))
    if not os.path.exists(path):
        h._text(f"Application/file not found: {path}", 404)
        return
    opener = _openers().get(os.path.splitext(path)[1].lower())
    if opener is None:
        h._text(f"no opener for {os.path.splitext(path)[1] or 'files without a suffix'} on this desktop", 400)
        return
    launch([*opener, path], False)
    name = data.get("window_name") or os.path.basename(path)
    deadline = time.monotonic() + float(data.get("timeout_seconds") or 30)
    while time.monotonic() < deadline:
        if windows(name) or windows(os.path.splitext(os.path.basename(path))[0]):
            h._text("File opened and window activated successfully")
            return
        time.sleep(0.2)
    h._text(f"Failed to find window for {name} within {data.get('timeout_seconds') or 30} seconds.", 500)


def _window_action(action: str):
    def handle(h: Handler) -> None:
        data = h._data()
        name = data.get("window_name")
        if not name:
            h._text("window_name required", 400)
            return
        found = windows(name, by_class=bool(data.get("by_class")), strict=bool(data.get("strict")))
        if not found:
            h._text(f"Window {name} not found (empty results)", 404)
            return
        for wid in found[:1]:
            argv = ["xdotool", "windowraise", wid, "windowfocus", "--sync", wid] if action == "activate" else \
                ["xdotool", "windowclose", wid]
            subprocess.run(argv, env=_env(), timeout=10, capture_output=True)
        h._text("Window activated successfully" if action == "activate" else "Window closed successfully.")
    return handle


def _cursor(h: Handler) -> None:
    out = subprocess.run(["xdotool", "getmouselocation", "--shell"], capture_output=True, text=True, env=_env(),
                         timeout=10).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    h._json([int(values.get("X", 0)), int(values.get("Y", 0))])


ROUTES = {
    ("GET", "/healthz"): lambda h: h._text("ok"),
    ("GET", "/screenshot"): lambda h: h._send(200, screenshot_png(), "image/png"),
    ("POST", "/execute"): _execute,
    ("POST", "/setup/execute"): _execute,
    ("POST", "/setup/launch"): _launch,
    ("POST", "/screen_size"): lambda h: h._json(dict(zip(("width", "height"), screen_size()))),
    ("GET", "/cursor_position"): _cursor,
    ("GET", "/platform"): lambda h: h._text("Linux"),
    ("POST", "/file"): _file,
    ("POST", "/setup/upload"): _upload,
    ("POST", "/list_directory"): _list_directory,
    ("POST", "/desktop_path"): _desktop_path,
    ("POST", "/setup/open_file"): _open_file,
    ("POST", "/setup/activate_window"): _window_action("activate"),
    ("POST", "/setup/close_window"): _window_action("close"),
    ("GET", "/accessibility"): lambda h: h._json({"AT": ocr_view()}),
}


def write_authority(path: str) -> str:
    """An X authority file with one fresh MIT-MAGIC-COOKIE-1 for display 0: the X server admits only clients that
    read it (the sandbox's own), and Xlib finds an entry (it warns without one)."""
    cookie = os.urandom(16)

    def field(data: bytes) -> bytes:
        return len(data).to_bytes(2, "big") + data

    def entry(family: int, address: bytes) -> bytes:
        return family.to_bytes(2, "big") + field(address) + field(DISPLAY[1:].encode()) + \
            field(b"MIT-MAGIC-COOKIE-1") + field(cookie)

    import socket

    # Wild for libxcb (PIL, xdotool, browsers); Local with this host's name for python-xlib, which ignores Wild
    data = entry(0xFFFF, b"") + entry(256, socket.gethostname().encode())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


# LibreOffice's settings as OSWorld's VM image has them: no tip of the day and no first-start bar over the sheet,
# and saving in the file's own format (.xlsx) without asking "Use Excel 2007-365!" / "Use ODF Format!" first, which
# the tasks' postconfig (Ctrl+S, then read the file) relies on
_LIBREOFFICE_ITEMS = (
    ("/org.openoffice.Office.Common/Misc", "ShowTipOfTheDay", "boolean", "false"),
    ("/org.openoffice.Office.Common/Save/Document", "WarnAlienFormat", "boolean", "false"),
    ("/org.openoffice.Setup/Product", "ooSetupLastVersion", "string", "7.4"),
    ("/org.openoffice.Setup/Product", "LastTimeGetInvolvedShown", "long", "2000000000"),
    ("/org.openoffice.Setup/Product", "LastTimeDonateShown", "long", "2000000000"),
)


# the home's user directories on OSWorld's Ubuntu image (xdg-user-dirs' defaults)
USER_DIRS = ("Desktop", "Documents", "Downloads", "Music", "Pictures", "Public", "Templates", "Videos")
# VLC as run once on OSWorld's image: without this, its first start opens the "Privacy and Network Access Policy"
# dialog, which takes the keyboard focus (a key meant for another window presses its button, and VLC then writes
# all of its options). Every other option is absent, so it reads as VLC's default.
VLCRC = "[qt] # Qt interface\nqt-privacy-ask=0\n"


def libreoffice_profile() -> str:
    items = "".join(f'<item oor:path="{path}"><prop oor:name="{name}" oor:op="fuse"><value>{value}</value></prop>'
                    f"</item>\n" for path, name, _kind, value in _LIBREOFFICE_ITEMS)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<oor:items xmlns:oor="http://openoffice.org/2001/registry" '
            'xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
            f"{items}</oor:items>\n")


def make_user_dirs() -> None:
    """The XDG directories the desktop names (XDG_CONFIG_HOME, ...), made before any app starts: an app that finds
    one missing falls back to the passwd entry's home, which the sandbox's uid does not have (LibreOffice then tries
    to make its profile in /libreoffice and stops with "User installation could not be completed"); and
    LibreOffice's profile and VLC's preferences seeded as OSWorld's image has them; and the user directories its
    home has (Desktop, Documents, Downloads, ...: its tasks' setups write into them without making them)."""
    for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        if os.environ.get(name):
            os.makedirs(os.environ[name], exist_ok=True)
    for name in USER_DIRS:
        os.makedirs(os.path.join(os.path.expanduser("~"), name), exist_ok=True)
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    profile = os.path.join(config, "libreoffice", "4", "user", "registrymodifications.xcu")
    if not os.path.exists(profile):
        os.makedirs(os.path.dirname(profile), exist_ok=True)
        with open(profile, "w", encoding="utf-8") as f:
            f.write(libreoffice_profile())
    vlcrc = os.path.join(config, "vlc", "vlcrc")
    if not os.path.exists(vlcrc):
        os.makedirs(os.path.dirname(vlcrc), exist_ok=True)
        with open(vlcrc, "w", encoding="utf-8") as f:
            f.write(VLCRC)


# what Ctrl+Alt+T opens: the first installed (xterm first: with a scalable font the OCR text view reads it; titled
# "Terminal" as the window OSWorld's setup steps activate by that name)
TERMINAL_TITLE = "Terminal"
TERMINALS = (["xterm", "-title", TERMINAL_TITLE, "-fa", "DejaVu Sans Mono", "-fs", "12", "-geometry", "100x30"],
             ["x-terminal-emulator"])


def terminal_command() -> list[str] | None:
    return next((argv for argv in TERMINALS if shutil.which(argv[0])), None)


# the desktop's sound: PulseAudio's null sink (no hardware), at half volume as a desktop in use is (OSWorld's volume
# task asks to turn it up to the maximum; a fresh null sink starts at 100 %)
START_VOLUME = "50%"


def start_audio() -> bool:
    """PulseAudio with its null sink, where it is installed (`scripts/setup_gui.sh --osworld-apps`): apps play into it
    and `pactl` reads and sets its volume, as on OSWorld's image (~30 ms of the desktop's start). False (and a line on
    stderr) where it cannot."""
    if shutil.which("pulseaudio") is None or shutil.which("pactl") is None:
        return False
    try:
        subprocess.run(["pulseaudio", "--start", "--exit-idle-time=-1"], env=_env(), timeout=20, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        subprocess.run(["pactl", "set-sink-volume", "@DEFAULT_SINK@", START_VOLUME], env=_env(), timeout=10,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except (OSError, subprocess.SubprocessError) as e:
        print(f"vm_server: no audio sink: {e}", file=sys.stderr)
        return False
    return True


def focus_when_mapped(title: str, known: set[str], timeout_s: float = 10.0) -> None:
    """Give the keyboard focus to the first new window named `title` (not in `known`) once it shows, as GNOME
    gives it to a new window: the desktop runs no window manager, and an app that set the focus to one of its own
    windows (a dialog) would otherwise keep the keys typed for the terminal. (xterm sets no _NET_WM_PID, so the
    window is told apart by its name.)"""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            new = [w for w in windows(title, strict=True) if w not in known]
            if new:
                subprocess.run(["xdotool", "windowfocus", new[0]], env=_env(), timeout=5,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                return
        except (OSError, subprocess.TimeoutExpired):
            return  # no xdotool: the focus stays where it was
        time.sleep(0.05)


def serve_terminal_shortcut() -> threading.Thread | None:
    """Ctrl+Alt+T opens a terminal, as on OSWorld's image (GNOME's shortcut): a passive grab of the key on the root
    window, in a thread of its own. None (and a line on stderr) where python-xlib or a terminal is missing."""
    argv = terminal_command()
    try:
        from Xlib import X, XK
        from Xlib.display import Display
    except ImportError:
        argv = None
    if argv is None:
        print("vm_server: no Ctrl+Alt+T terminal (python-xlib or a terminal emulator is missing)", file=sys.stderr)
        return None
    display = Display(DISPLAY)
    root = display.screen().root
    keycode = display.keysym_to_keycode(XK.string_to_keysym("t"))
    # the grab names exact modifiers: also with NumLock (Mod2) and CapsLock on, or the shortcut dies with them
    for extra in (0, X.Mod2Mask, X.LockMask, X.Mod2Mask | X.LockMask):
        root.grab_key(keycode, X.ControlMask | X.Mod1Mask | extra, True, X.GrabModeAsync, X.GrabModeAsync)
    display.sync()

    def loop() -> None:
        while True:
            try:
                event = display.next_event()
            except Exception:  # the display went away: the desktop is closing
                return
            if event.type == X.KeyPress:
                known = set(windows(TERMINAL_TITLE, strict=True))
                launch(argv, False, cwd=os.path.expanduser("~"))
                threading.Thread(target=focus_when_mapped, args=(TERMINAL_TITLE, known), daemon=True).start()

    thread = threading.Thread(target=loop, name="terminal-shortcut", daemon=True)
    thread.start()
    return thread


def start_display(width: int, height: int, window_manager: str | None) -> subprocess.Popen:
    """Xvfb on :0 (private to this sandbox), ready when its socket exists; then the window manager, if any."""
    authority = write_authority(os.path.join(os.path.expanduser("~"), ".Xauthority"))
    os.environ["XAUTHORITY"] = authority
    # -noreset: by default the server resets (pointer re-centred, state gone) whenever its last client leaves
    xvfb = subprocess.Popen(["Xvfb", DISPLAY, "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp", "-noreset",
                             "-auth", authority], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while not os.path.exists("/tmp/.X11-unix/X0"):
        if xvfb.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"Xvfb did not start: {xvfb.stderr.read().decode(errors='replace')[-2000:]}")
        time.sleep(0.05)
    if window_manager:
        launch(shlex.split(window_manager), False)
    return xvfb


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", help="the unix socket to make and answer on")
    where.add_argument("--listen-fd", type=int, help="an inherited, listening unix socket to answer on (the host made "
                                                      "it where nothing of the sandbox can reach its path)")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    parser.add_argument("--window-manager", default="", help="a command line, started after Xvfb (default: none)")
    parser.add_argument("--terminal-shortcut", action="store_true",
                        help="Ctrl+Alt+T opens a terminal, as on OSWorld's image (a shell for the agent)")
    args = parser.parse_args(argv)
    make_user_dirs()
    xvfb = start_display(args.width, args.height, args.window_manager or None)
    if args.terminal_shortcut:
        serve_terminal_shortcut()
    start_audio()
    if args.listen_fd is not None:
        server = UnixHTTPServer("", Handler, bind_and_activate=False)
        server.socket.close()
        server.socket = socket.socket(fileno=args.listen_fd)
        server.socket.set_inheritable(False)  # the apps it starts do not get it
    else:
        if os.path.exists(args.socket):
            os.unlink(args.socket)
        server = UnixHTTPServer(args.socket, Handler)
        os.chmod(args.socket, 0o600)

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    print("ready", flush=True)  # the desktop waits for this line
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        with _lock:
            for proc in _children:
                _kill_group(proc)
        xvfb.kill()


if __name__ == "__main__":
    main(sys.argv[1:])
