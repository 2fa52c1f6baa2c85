"""The policy's actions: Qwen's `computer_use` tool calls, parsed from a response and turned into pyautogui code that
OSWorld's VM server runs (``python3 -c CODE`` through ``/execute``), on a local desktop and an OSWorld VM alike.

A response is one line ``Action: <what the agent does, in words>`` followed by exactly one
``<tool_call>{"name": "computer_use", "arguments": {...}}</tool_call>`` (:func:`parse_response`). The arguments
(:data:`COMPUTER_USE`, upstream's schema) name an `action` and its fields; coordinates are relative by default,
0-999 on each axis of the screen (``x * width / 999``).

Fixed against upstream (spec section 7): `triple_click` and `hscroll` produce code; typed text is embedded with
``repr`` (a newline or quote cannot break the code, nothing can inject Python) and newlines press Enter; key names
are checked against the keys pyautogui knows; ``<`` is typed as shift+comma (pyautogui types ``>`` for it on X);
non-ASCII text is refused with a clear error (pyautogui cannot type it) instead of typing something else.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# Why a `computer_use` result has "error": true (its "error_code"): the agent loop counts a refused call as a response
# without a valid action (towards max_parse_errors), an action that ran and failed as a valid one. The code, not the
# observation's wording, is what the loop reads.
REFUSED = "REFUSED"  # nothing ran: an unknown tool, or arguments that are no action
ACTION_FAILED = "ACTION_FAILED"  # the action ran and failed, or no answer came within the time limit

ACTIONS = ("key", "type", "mouse_move", "left_click", "left_click_drag", "right_click", "middle_click",
           "double_click", "triple_click", "scroll", "hscroll", "wait", "terminate")
COMPUTER_USE = {
    "type": "function",
    "function": {
        "name": "computer_use",
        "description": ("Use a mouse and keyboard to interact with a computer, and take screenshots. The screen's "
                        "resolution is 1000x1000: coordinates are relative, (0, 0) top left, (999, 999) bottom right."),
        "parameters": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(ACTIONS), "description": "the action to perform"},
                "keys": {"type": "array", "items": {"type": "string"},
                         "description": "key: the keys, pressed together (a hotkey) or one key"},
                "text": {"type": "string", "description": "type: the text to type"},
                "coordinate": {"type": "array", "items": {"type": "number"},
                               "description": "[x, y]: where to click or move to; the end of a drag"},
                "start_coordinate": {"type": "array", "items": {"type": "number"},
                                     "description": "left_click_drag: where the drag starts (default: the pointer)"},
                "pixels": {"type": "number", "description": "scroll/hscroll: amount (positive: up / right)"},
                "time": {"type": "number", "description": "wait: seconds"},
                "status": {"type": "string", "enum": ["success", "failure"],
                           "description": "terminate: whether the task is done, or cannot be done"},
            },
            "required": ["action"],
        },
    },
}
# The lean profile (`--gui-tools lean`) of a text policy: the same tool and calls, described by the actions a Tk or
# web app needs (the environment still runs every action of ACTIONS); with LEAN_SYSTEM_PROMPT, 316 prompt tokens of
# system prompt and tool on Qwen2.5-Coder instead of 629.
LEAN_ACTIONS = ("left_click", "double_click", "triple_click", "type", "key", "scroll", "terminate")
LEAN_COMPUTER_USE = {
    "type": "function",
    "function": {
        "name": "computer_use",
        "description": "Mouse and keyboard on the screen; coordinates from 0 to 999.",
        "parameters": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(LEAN_ACTIONS)},
                "coordinate": {"type": "array", "description": "[x, y]"},
                "text": {"type": "string"},
                "keys": {"type": "array", "description": "pressed together"},
                "pixels": {"type": "number"},
                "status": {"type": "string", "enum": ["success", "failure"]},
            },
            "required": ["action"],
        },
    },
}
TOOL_PROFILES = {"upstream": COMPUTER_USE, "lean": LEAN_COMPUTER_USE}
# the keys pyautogui presses on X (its KEYBOARD_KEYS, without the single characters, which are checked apart)
NAMED_KEYS = frozenset(
    "enter return tab space backspace delete del esc escape up down left right home end pageup pagedown pgup pgdn "
    "insert shift shiftleft shiftright ctrl ctrlleft ctrlright alt altleft altright win winleft winright command "
    "option capslock numlock scrolllock printscreen prtsc pause menu apps volumemute volumedown volumeup "
    "playpause nexttrack prevtrack".split() + [f"f{i}" for i in range(1, 25)])
KEY_ALIASES = {"control": "ctrl", "cmd": "win", "super": "win", "meta": "win", "return": "enter", "esc": "escape",
               "del": "delete", "pgup": "pageup", "pgdn": "pagedown", "arrowup": "up", "arrowdown": "down",
               "arrowleft": "left", "arrowright": "right", "page_up": "pageup", "page_down": "pagedown"}
DRAG_SECONDS = 0.5
MAX_WAIT_S = 30.0
MAX_SCROLL = 50  # scroll clicks in one action (pyautogui on X presses the wheel button that many times)


class ActionError(ValueError):
    """A response or an action the environment cannot run; the message says why (it becomes the observation)."""


@dataclass(frozen=True)
class Step:
    """What one action does: pyautogui `code` to run, or a `special` (WAIT, DONE, FAIL) with `wait_s`."""

    code: str | None = None
    special: str | None = None
    wait_s: float = 0.0
    action: str = ""


def parse_response(text: str) -> tuple[str, dict]:
    """(the ``Action:`` line's text, the one computer_use call's arguments); ActionError when the response does not
    hold exactly one well-formed call (the blocks are read by the shared strict parser, slime.agentic.agent_loop)."""
    from slime.agentic.agent_loop import parse_tool_calls

    if not isinstance(text, str):
        raise ActionError("the response is not text")
    action_line = ""
    for line in text.splitlines():
        if line.strip().startswith("Action:"):
            action_line = line.strip()[len("Action:"):].strip()
            break
    parsed = parse_tool_calls(text)
    if parsed.errors:
        raise ActionError(parsed.errors[0])
    if not parsed.calls:
        raise ActionError("no <tool_call>...</tool_call> in the response")
    if len(parsed.calls) > 1:
        raise ActionError(f"{len(parsed.calls)} tool calls in one response; exactly one is allowed")
    if parsed.calls[0].name != "computer_use":
        raise ActionError('the tool call must be {"name": "computer_use", "arguments": {...}}')
    return action_line, parsed.calls[0].arguments


def _number(value, what: str) -> float:
    """A JSON number the policy sent, as a finite float: JSON allows Infinity and NaN, and integers of any length
    (which float() cannot take), and none of them may reach the program or the host's arithmetic."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ActionError(f"{what} must be a number")
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        number = math.inf
    if not math.isfinite(number):
        raise ActionError(f"{what} must be a finite number, got {str(value)[:20]}")
    return number


def _point(value, screen: tuple[int, int], coordinate_type: str, what: str = "coordinate") -> tuple[int, int]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ActionError(f"{what} must be [x, y] (two numbers)")
    width, height = screen
    x, y = _number(value[0], f"{what}'s x"), _number(value[1], f"{what}'s y")
    if coordinate_type == "relative":
        if not (0 <= x <= 999 and 0 <= y <= 999):
            raise ActionError(f"{what} {list(value)} is outside 0-999")
        x, y = x * width / 999, y * height / 999
    elif not (0 <= x < width and 0 <= y < height):
        raise ActionError(f"{what} {list(value)} is outside the {width}x{height} screen")
    return min(int(round(x)), width - 1), min(int(round(y)), height - 1)


def key_name(key) -> str:
    if not isinstance(key, str) or not key:
        raise ActionError("a key must be a non-empty string")
    if len(key) == 1:
        if not (32 <= ord(key) < 127):
            raise ActionError(f"key {key!r} cannot be pressed (not an ASCII character)")
        return key.lower()  # a letter: pyautogui's key names are lower case
    name = key.strip().lower()
    name = KEY_ALIASES.get(name, name)
    if name not in NAMED_KEYS:
        raise ActionError(f"unknown key {key!r}")
    return name


def _type_code(text) -> str:
    if not isinstance(text, str) or not text:
        raise ActionError("type needs a non-empty 'text'")
    bad = sorted({c for c in text if not (32 <= ord(c) < 127 or c in "\n\t")})
    if bad:
        raise ActionError(f"cannot type {''.join(bad)!r}: only ASCII text can be typed")
    lines = []
    for piece in re.split(r"(\n|<)", text):
        if piece == "\n":
            lines.append("pyautogui.press('enter')")
        elif piece == "<":
            lines.append("pyautogui.hotkey('shift', ',')")
        elif piece:
            lines.append(f"pyautogui.write({piece!r}, interval=0.01)")
    return "\n".join(lines)


def to_step(arguments: dict, screen: tuple[int, int], coordinate_type: str = "relative") -> Step:
    """The computer_use `arguments` as a :class:`Step` on a `screen` of (width, height) pixels."""
    if coordinate_type not in ("relative", "absolute"):
        raise ValueError(f"coordinate_type must be relative or absolute, got {coordinate_type!r}")
    action = arguments.get("action")
    if action not in ACTIONS:
        raise ActionError(f"unknown action {action!r} (one of: {', '.join(ACTIONS)})")

    def at(name: str = "coordinate", required: bool = True) -> tuple[int, int] | None:
        if arguments.get(name) is None:
            if required:
                raise ActionError(f"{action} needs '{name}'")
            return None
        return _point(arguments[name], screen, coordinate_type, name)

    if action == "terminate":
        status = arguments.get("status")
        if status not in ("success", "failure"):
            raise ActionError("terminate needs status 'success' or 'failure'")
        return Step(special="DONE" if status == "success" else "FAIL", action=action)
    if action == "wait":
        seconds = _number(arguments.get("time", 1.0), "wait's time")
        if seconds < 0:
            raise ActionError("wait's time must be a number of seconds >= 0")
        return Step(special="WAIT", wait_s=min(seconds, MAX_WAIT_S), action=action)
    if action == "key":
        keys = arguments.get("keys")
        if isinstance(keys, str):
            keys = [keys]
        if not isinstance(keys, list) or not keys:
            raise ActionError("key needs 'keys': a list of key names")
        names = [key_name(k) for k in keys]
        code = f"pyautogui.press({names[0]!r})" if len(names) == 1 else \
            "pyautogui.hotkey(" + ", ".join(repr(n) for n in names) + ")"
        return Step(code=code, action=action)
    if action == "type":
        return Step(code=_type_code(arguments.get("text")), action=action)
    if action in ("scroll", "hscroll"):
        if arguments.get("pixels") is None:
            raise ActionError(f"{action} needs 'pixels' (a number)")
        pixels = _number(arguments["pixels"], f"{action}'s pixels")
        point = at(required=False)
        move = f"pyautogui.moveTo({point[0]}, {point[1]})\n" if point else ""
        clicks = int(max(-MAX_SCROLL, min(MAX_SCROLL, pixels)))  # as wait's time: a bound, not an error
        return Step(code=f"{move}pyautogui.{action}({clicks})", action=action)
    if action == "left_click_drag":
        end = at()
        start = at("start_coordinate", required=False)
        first = f"pyautogui.moveTo({start[0]}, {start[1]})\n" if start else ""
        return Step(code=f"{first}pyautogui.dragTo({end[0]}, {end[1]}, duration={DRAG_SECONDS}, button='left')",
                    action=action)
    x, y = at()
    call = {"mouse_move": "moveTo", "left_click": "click", "right_click": "rightClick",
            "middle_click": "middleClick", "double_click": "doubleClick", "triple_click": "tripleClick"}[action]
    return Step(code=f"pyautogui.{call}({x}, {y})", action=action)


def program(code: str) -> str:
    """The whole program /execute runs for `code` (upstream's preamble: no fail-safe corner, no pause)."""
    return f"import pyautogui\npyautogui.FAILSAFE = False\npyautogui.PAUSE = 0.02\n{code}\n"


__all__ = ["ACTIONS", "COMPUTER_USE", "ActionError", "Step", "key_name", "parse_response", "program", "to_step"]
