import os
import stat
from pathlib import Path

S = Path("/app/server")


def mode(p):
    return stat.S_IMODE(os.stat(S / p).st_mode)


def test_secrets_directory_owner_only():
    assert mode("secrets") == 0o700


def test_secret_files_owner_read_write_only():
    assert mode("secrets/tls.key") == 0o600
    assert mode("secrets/db.env") == 0o600


def test_public_files_world_readable_not_executable():
    assert mode("public/index.html") == 0o644
    assert mode("public/css/site.css") == 0o644


def test_scripts_executable_by_everyone():
    assert mode("bin/start.sh") == 0o755
    assert mode("bin/stop.sh") == 0o755


def test_contents_unchanged():
    assert mode("secrets") == 0o700
    assert (S / "secrets/db.env").read_text() == "db_password=hunter2\n"
    assert (S / "bin/start.sh").read_text() == "#!/bin/sh\necho start\n"
