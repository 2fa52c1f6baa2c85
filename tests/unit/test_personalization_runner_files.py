"""What a finished openclaw-test run keeps on disk."""

from personalization.runner import remove_checkpoints


def test_checkpoints_are_deleted_and_the_freed_bytes_counted(tmp_path):
    ckpt = tmp_path / "server" / "ckpt"
    (ckpt / "iter_0000010" / "model").mkdir(parents=True)
    (ckpt / "iter_0000010" / "model" / "model.safetensors").write_bytes(b"x" * 1000)
    (ckpt / "weights" / "v000001").mkdir(parents=True)
    (ckpt / "weights" / "v000001" / "model.safetensors").write_bytes(b"y" * 24)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("10")
    (tmp_path / "server" / "conversations.db").write_bytes(b"keep me")

    assert remove_checkpoints(ckpt) == 1000 + 24 + 2
    assert not ckpt.exists()
    assert (tmp_path / "server" / "conversations.db").read_bytes() == b"keep me"  # only the checkpoints go


def test_a_run_without_checkpoints_frees_nothing(tmp_path):
    assert remove_checkpoints(tmp_path / "missing") == 0
    (tmp_path / "file").write_text("not a folder")
    assert remove_checkpoints(tmp_path / "file") == 0 and (tmp_path / "file").exists()
