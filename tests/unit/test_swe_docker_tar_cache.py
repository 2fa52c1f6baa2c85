"""The Docker backend's repository tar: one checkout per base commit, also when episodes start together."""
import threading
import time
from types import SimpleNamespace

from slime.agentic.swe import docker_backend


def test_concurrent_episodes_of_one_instance_check_out_once(monkeypatch, tmp_path):
    checkouts = []

    def slow_checkout(instance, dest):
        checkouts.append(instance.base_commit)
        time.sleep(0.2)  # long enough that every thread below misses the cache while the first one works
        dest.mkdir(parents=True)
        (dest / "module.py").write_text(f"commit = {instance.base_commit!r}\n")
        return dest

    monkeypatch.setattr(docker_backend.repos, "checkout", slow_checkout)
    monkeypatch.setattr(docker_backend, "_TARS", type(docker_backend._TARS)())
    instance = SimpleNamespace(base_commit="c0ffee" * 6 + "abcd")
    results = []
    threads = [threading.Thread(target=lambda: results.append(docker_backend.repository_tar(instance)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert checkouts == [instance.base_commit]
    assert len(results) == 8 and len(set(results)) == 1 and b"module.py" in results[0]
    # another commit is its own checkout
    docker_backend.repository_tar(SimpleNamespace(base_commit="f" * 40))
    assert len(checkouts) == 2
