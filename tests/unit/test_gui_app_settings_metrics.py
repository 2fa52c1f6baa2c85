"""OSWorld's metrics over the apps' own settings files, on files written here in each app's format: VLC's vlcrc
(a commented default reads as the default; the last line of a key counts), GIMP's gimprc/sessionrc S-expressions,
Thunderbird's prefs.js. Each on a state that meets the rule and one that does not; a missing file scores 0."""

from __future__ import annotations

import pytest

from slime.agentic.gui.evaluators import METRICS
from slime.agentic.gui.evaluators.gimp import check_config_status
from slime.agentic.gui.evaluators.thunderbird import check_thunderbird_prefs, read_prefs
from slime.agentic.gui.evaluators.vlc import (check_global_key_play_pause, check_one_instance_when_started_from_file,
                                              check_play_and_exit, check_qt_bgcone, check_qt_max_volume,
                                              check_qt_minimal_view, check_qt_slider_colours,
                                              is_vlc_recordings_folder, vlc_option)

# what VLC writes: a section header, a description comment, then the option (commented when it is the default)
VLCRC_DEFAULTS = """\
[qt] # Qt interface
# Show background cone or art (boolean)
#qt-bgcone=1
# Maximum Volume displayed (integer)
#qt-max-volume=125
# Start in minimal view (without menus) (boolean)
#qt-minimal-view=0
# Define the colors of the volume slider (string)
#qt-slider-colours=153;210;153;20;210;20;255;199;15;245;39;29
[core] # core program
# Record directory (string)
#input-record-path=
# Play and exit (boolean)
#play-and-exit=0
# Allow only one running instance when started from file (boolean)
#one-instance-when-started-from-file=1
# Play/Pause (string)
#global-key-play-pause=
"""
VLCRC_CHANGED = VLCRC_DEFAULTS.replace("#qt-bgcone=1", "qt-bgcone=0").replace(
    "#qt-max-volume=125", "qt-max-volume=200").replace("#qt-minimal-view=0", "qt-minimal-view=1").replace(
    "#qt-slider-colours=153;210;153;20;210;20;255;199;15;245;39;29", "qt-slider-colours=0;0;0;20;20;20;40;40;40;60;60;60"
).replace("#input-record-path=", "input-record-path=/home/user/Desktop").replace(
    "#play-and-exit=0", "play-and-exit=1").replace("#one-instance-when-started-from-file=1",
                                                   "one-instance-when-started-from-file=0").replace(
    "#global-key-play-pause=", "global-key-play-pause=Ctrl+Space")


@pytest.fixture
def vlcrc(tmp_path):
    def write(text: str) -> str:
        path = tmp_path / "vlcrc"
        path.write_text(text)
        return str(path)
    return write


def test_a_vlc_option_reads_its_default_commented_or_its_value(vlcrc):
    assert vlc_option(VLCRC_DEFAULTS, "qt-bgcone", "?") == "1"  # the commented default
    assert vlc_option(VLCRC_CHANGED, "qt-bgcone", "?") == "0"
    assert vlc_option("[qt]\n", "qt-bgcone", "1") == "1"  # absent: VLC's default
    assert vlc_option("qt-bgcone=1\nqt-bgcone=0\n", "qt-bgcone", "?") == "0"  # the last line counts


@pytest.mark.parametrize("metric, rule", [
    (check_qt_bgcone, {"expected_qt_bgcone": 0}),
    (check_qt_max_volume, {"expected_qt_max_volume": 200}),
    (check_qt_minimal_view, {"expected_qt_minimal_view": 1}),
    (check_qt_slider_colours, {"type": "blackish"}),
    (check_global_key_play_pause, {"expected_global_key_play_pause": 1}),
    (check_one_instance_when_started_from_file, {"expected_one_instance_when_started_from_file": 0}),
    (check_play_and_exit, {"expected_play_and_exit": 1}),
    (is_vlc_recordings_folder, {"recording_file_path": "/home/user/Desktop"}),
])
def test_each_vlc_metric_scores_the_changed_option_1_and_the_default_0(vlcrc, metric, rule):
    assert METRICS[metric.__name__] is metric
    assert metric(vlcrc(VLCRC_CHANGED), rule) == 1.0
    assert metric(vlcrc(VLCRC_DEFAULTS), rule) == 0.0
    assert metric(None, rule) == 0.0


def test_vlc_defaults_meet_a_rule_that_asks_for_the_default(vlcrc):
    # OSWorld's "prevent auto-closing" task asks for play-and-exit 0: VLC's default (its setup turns it on first)
    assert check_play_and_exit(vlcrc(VLCRC_DEFAULTS), {"expected_play_and_exit": 0}) == 1.0
    assert check_qt_slider_colours(vlcrc(VLCRC_DEFAULTS), {
        "type": "match", "expected_qt_slider_colours": "153;210;153;20;210;20;255;199;15;245;39;29"}) == 1.0
    assert check_qt_slider_colours(vlcrc("qt-slider-colours=0;0;0;20;20;20;40;40;40;60;60;200\n"),
                                   {"type": "blackish"}) == 0.0  # one channel of one stop is bright


def test_the_recordings_folder_ignores_a_commented_line(vlcrc):
    assert is_vlc_recordings_folder(vlcrc("#input-record-path=/home/user/Desktop\n"),
                                    {"recording_file_path": "/home/user/Desktop"}) == 0.0


GIMPRC = """\
# GIMP gimprc
(undo-levels 100)
(theme "Light")
(default-image
    (width 1920))
(layer-new-name "Square")

# end of gimprc
"""


def test_gimp_config_status_compares_the_key_and_the_last_word(tmp_path):
    path = tmp_path / "gimprc"
    path.write_text(GIMPRC)
    assert check_config_status(str(path), {"key": "undo-levels", "value": "100"}) == 1.0
    assert check_config_status(str(path), {"key": "undo-levels", "value": "5"}) == 0.0
    assert check_config_status(str(path), {"key": "theme", "value": "\"Light\""}) == 1.0  # quotes are the value's
    assert check_config_status(str(path), {"key": "theme", "value": "Light"}) == 0.0
    assert check_config_status(str(path), {"key": "layer-new-name", "value": "\"Square\""}) == 1.0
    assert check_config_status(str(path), {"key": ["default-image", "x"], "value": "1"}) == 0.0
    (tmp_path / "sessionrc").write_text("(session-info \"toplevel\"\n    (position 10 10))\n(hide-docks yes)\n")
    assert check_config_status(str(tmp_path / "sessionrc"), {"key": "hide-docks", "value": "yes"}) == 1.0
    assert check_config_status(None, {"key": "hide-docks", "value": "yes"}) == 0.0


PREFS = """\
// Mozilla User Preferences
user_pref("extensions.activeThemeID", "thunderbird-compact-dark@mozilla.org");
user_pref("mail.identity.id1.auto_quote", false);
user_pref("mail.identity.id1.htmlSigText", "Anonym\\nXYZ Lab");
user_pref("mail.server.default.autosync_offline_stores", false);
user_pref("mail.server.server1.check_time", 10);
"""


def test_thunderbird_prefs_expect_and_unexpect(tmp_path):
    path = tmp_path / "prefs.js"
    path.write_text(PREFS)
    assert ("mail.identity.id1.htmlSigText", "Anonym\nXYZ Lab") in read_prefs(str(path))
    assert check_thunderbird_prefs(str(path), {"expect": {"extensions.activeThemeID": {"method": "re",
                                                                                         "ref": "dark"}}}) == 1.0
    assert check_thunderbird_prefs(str(path), {"expect": {"mail.identity.id1.htmlSigText": {
        "method": "re.S", "ref": "Anonym\\nXYZ Lab"}}}) == 1.0
    assert check_thunderbird_prefs(str(path), {"expect": {"mail.identity.id1.auto_quote": {"method": "eq",
                                                                                             "ref": False}}}) == 1.0
    # a key the file lacks is not met; an unexpected value present fails the whole rule
    assert check_thunderbird_prefs(str(path), {"expect": {"mail.imap.use_status_for_biff": {"method": "eq",
                                                                                              "ref": False}}}) == 0.0
    assert check_thunderbird_prefs(str(path), {
        "expect": {"mail.identity.id1.auto_quote": {"method": "eq", "ref": False}},
        "unexpect": {"mail.server.default.autosync_offline_stores": {"method": "eq", "ref": False}}}) == 0.0
    assert check_thunderbird_prefs(None, {"expect": {}}) == 0.0
