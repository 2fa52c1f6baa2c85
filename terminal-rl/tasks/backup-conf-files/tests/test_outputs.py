import os
from pathlib import Path

BACKUP = Path("/app/backup")
EXPECTED = {
    "main.conf": "top=1\n",
    "app/app.conf": "debug=false\n",
    "nginx/nginx.conf": "worker_processes 2;\n",
    "nginx/sites/default.conf": "server { listen 80; }\n",
    "nginx/sites/my site.conf": "server { listen 8080; }\n",
}


def backed_up():
    assert BACKUP.is_dir(), "/app/backup was not created"
    out = {}
    for dirpath, _, names in os.walk(BACKUP):
        for name in names:
            p = Path(dirpath, name)
            out[str(p.relative_to(BACKUP))] = p.read_text()
    return out


def test_only_conf_files_copied():
    got = backed_up()
    assert got and all(name.endswith(".conf") for name in got)


def test_structure_and_contents():
    assert backed_up() == EXPECTED


def test_originals_still_there():
    assert backed_up()
    for rel, text in EXPECTED.items():
        assert (Path("/app/etc") / rel).read_text() == text
