"""The desktop's home as OSWorld's image has it, made by the VM server before any app starts: the XDG directories,
the user directories of OSWorld's image (Desktop, Documents, ...), LibreOffice's profile without its first-start
dialogs, and VLC's preferences without its first-run privacy dialog (which took the keyboard focus). An existing file
is never overwritten (a task's setup may have written it)."""

from __future__ import annotations

from slime.agentic.gui import vm_server


def test_the_home_is_seeded_for_libreoffice_and_vlc(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    vm_server.make_user_dirs()
    config = tmp_path / "xdg_config_home"
    assert (tmp_path / "xdg_cache_home").is_dir() and (tmp_path / "xdg_data_home").is_dir()
    assert all((tmp_path / "home" / name).is_dir() for name in ("Desktop", "Documents", "Downloads", "Pictures"))
    assert "ShowTipOfTheDay" in (config / "libreoffice/4/user/registrymodifications.xcu").read_text()
    vlcrc = (config / "vlc/vlcrc").read_text()
    assert "qt-privacy-ask=0" in vlcrc.splitlines()
    # seeded once: what is there stays
    (config / "vlc/vlcrc").write_text("qt-bgcone=0\n")
    vm_server.make_user_dirs()
    assert (config / "vlc/vlcrc").read_text() == "qt-bgcone=0\n"
