"""OSWorld's VLC metrics (``desktop_env/evaluators/metrics/vlc.py``) over VLC's preferences file, ``vlcrc`` (the
``vlc_config`` getter copies ``~/.config/vlc/vlcrc``). Each reads one option and compares it with the rule.

How OSWorld reads an option, kept here because a task's expected value relies on it: VLC writes every option,
the ones left at their default commented out (``#qt-bgcone=1``), the changed ones plain (``qt-bgcone=0``); the last
line holding ``<key>=`` gives the value whether commented or not, and a file without the key gives VLC's default.
So a commented default reads as that default. ``is_vlc_recordings_folder`` alone skips commented lines and takes
the first line that names ``input-record-path`` (no such line: 0). A missing file scores 0.
"""

from __future__ import annotations


def _text(path: str | None) -> str | None:
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def vlc_option(text: str, key: str, default: str, marker: str | None = None) -> str:
    """The value of `key` as OSWorld reads it: the last line holding `marker` (``key=``), commented or not."""
    value = default
    for line in text.split("\n"):
        if (marker or f"{key}=") in line:
            value = line.split("=")[-1].strip()
    return value


def _expected(rule: dict, name: str) -> str:
    want = rule[name]
    return str(want) if isinstance(want, int) else want


def _option_is(path: str | None, rule: dict, key: str, default: str) -> float:
    text = _text(path)
    if text is None:
        return 0.0
    return float(vlc_option(text, key, default) == _expected(rule, f"expected_{key.replace('-', '_')}"))


def check_qt_bgcone(actual_config_path: str | None, rule: dict) -> float:
    return _option_is(actual_config_path, rule, "qt-bgcone", "1")


def check_qt_max_volume(actual_config_path: str | None, rule: dict) -> float:
    return _option_is(actual_config_path, rule, "qt-max-volume", "125")


def check_qt_minimal_view(actual_config_path: str | None, rule: dict) -> float:
    return _option_is(actual_config_path, rule, "qt-minimal-view", "0")


def check_one_instance_when_started_from_file(actual_config_path: str | None, rule: dict) -> float:
    return _option_is(actual_config_path, rule, "one-instance-when-started-from-file", "1")


def check_play_and_exit(actual_config_path: str | None, rule: dict) -> float:
    return _option_is(actual_config_path, rule, "play-and-exit", "0")


def check_global_key_play_pause(actual_config_path: str | None, rule: dict) -> float:
    """Whether a global play/pause key is bound: "1" when the option holds a key, "0" when it is empty or absent."""
    text = _text(actual_config_path)
    if text is None:
        return 0.0
    bound = "0" if vlc_option(text, "global-key-play-pause", "") == "" else "1"
    return float(bound == _expected(rule, "expected_global_key_play_pause"))


SLIDER_DEFAULT = "153;210;153;20;210;20;255;199;15;245;39;29"  # VLC's four gradient stops, r;g;b each


def check_qt_slider_colours(actual_config_path: str | None, rule: dict) -> float:
    """`match`: the colours string equals the rule's; `blackish`: every r;g;b stop has all channels below 100."""
    text = _text(actual_config_path)
    if text is None:
        return 0.0
    colours = vlc_option(text, "qt-slider-colours", SLIDER_DEFAULT, marker="qt-slider-colours")
    if rule["type"] == "match":
        return float(colours == rule["expected_qt_slider_colours"])
    if rule["type"] == "blackish":
        try:
            values = [int(v) for v in colours.split(";")]
        except ValueError:
            return 0.0
        stops = list(zip(values[0::3], values[1::3], values[2::3]))
        return float(all(channel < 100 for stop in stops for channel in stop))
    raise ValueError(f"check_qt_slider_colours: rule type {rule['type']!r} is not supported")


def is_vlc_recordings_folder(actual_config_path: str | None, rule: dict) -> float:
    text = _text(actual_config_path)
    if text is None:
        return 0.0
    for line in text.split("\n"):
        if line.startswith("#") or not line.strip():
            continue
        if "input-record-path" in line:
            return float(line.split("=")[-1].strip() == rule["recording_file_path"])
    return 0.0


VLC_METRICS = (check_qt_bgcone, check_qt_max_volume, check_qt_minimal_view, check_qt_slider_colours,
               check_global_key_play_pause, check_one_instance_when_started_from_file, check_play_and_exit,
               is_vlc_recordings_folder)

__all__ = ["SLIDER_DEFAULT", "VLC_METRICS", "vlc_option", *(f.__name__ for f in VLC_METRICS)]
