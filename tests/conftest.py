"""Shared fixtures: tiny models (built once, cached) and real engine servers on free loopback ports."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import sys
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)
# shared test helpers (tests/helpers) are imported as `helpers.*` from every tier
_TESTS = str(Path(__file__).resolve().parent)
_REPO = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
# each method folder's own modules (toolcall-rl/generate_with_retool.py, ...) import by name, as the folder's
# launchers make them importable (`--extra-python-path "$HERE"`); test_method_folders.py checks that no two folders
# hold a module of the same name
from helpers.method_folders import METHOD_FOLDERS  # noqa: E402

for _folder in METHOD_FOLDERS:
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))


@pytest.fixture(autouse=True)
def _python_path_restored():
    """A test that parses `--extra-python-path` puts its folders first on `sys.path` and on PYTHONPATH for the
    processes it starts (`slime.utils.hooks.add_method_dirs_to_path`): a forked folder's modules would shadow the
    shipped ones in later tests; the next test starts from the path it had."""
    before, path, modules = os.environ.get("PYTHONPATH"), list(sys.path), set(sys.modules)
    yield
    sys.path[:] = path
    # and a module a test imported from a copied folder (the parser imports hook modules to let them add flags)
    for name in set(sys.modules) - modules:
        origin = getattr(sys.modules.get(name), "__file__", None) or ""
        if origin and not origin.startswith((_REPO, sys.prefix, sys.base_prefix)):
            del sys.modules[name]
    if before is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = before


@pytest.fixture(scope="session")
def tiny_model_path():
    from slime.models.tiny import build_tiny_model

    return build_tiny_model()


@pytest.fixture(scope="session")
def tiny_model(tiny_model_path):
    """The tiny model loaded in this process, for reference forward passes."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(tiny_model_path)


@pytest.fixture(scope="session")
def tool_model_path(tiny_model_path):
    """The tiny model fine-tuned to hold the get_weather conversation of helpers.tool_model (cached)."""
    from helpers.tool_model import build_tool_model

    return build_tool_model()


@pytest.fixture(scope="module")
def engine_server(tiny_model_path, tmp_path_factory):
    """A real engine process serving the tiny model, shared by the tests of one module."""
    from slime.engine.launch import EngineProcess

    log = tmp_path_factory.mktemp("engine") / "engine.log"
    with EngineProcess(tiny_model_path, log_path=log, ready_timeout=120) as server:
        yield server


@pytest.fixture()
def engine_client(engine_server):
    from slime.engine.client import EngineClient

    with EngineClient(engine_server.url, timeout=120.0) as client:
        yield client


@pytest.fixture(scope="session")
def openclaw_captures():
    """What the real OpenClaw client sent (tests/fixtures/openclaw_capture, see ../shared/reference/openclaw_client.md)."""
    import json

    folder = Path(_TESTS) / "fixtures" / "openclaw_capture"
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))}


@pytest.fixture(scope="module")
def dist_info():
    """A gloo group of one (the actor's collectives need a group), torn down after the module."""
    import torch.distributed as torch_dist

    from slime.backends.fsdp.parallel import DistInfo

    created = not torch_dist.is_initialized()
    if created:
        torch_dist.init_process_group("gloo", store=torch_dist.HashStore(), rank=0, world_size=1)
    yield DistInfo(0, 1, 0, torch.device("cpu"))
    if created:
        torch_dist.destroy_process_group()


@pytest.fixture()
def clean_distill_env(monkeypatch):
    """The Combine/OPD loss weights and bound come from the environment too: tests start without them."""
    for name in ("OPENCLAW_COMBINE_W_RL", "OPENCLAW_COMBINE_W_OPD", "OPENCLAW_OPD_ADVANTAGE_BOUND"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def base_dir(tmp_path):
    """Where sandboxes' work dirs go (`Sandbox(base_dir=...)`), so a test can check that none is left behind."""
    d = tmp_path / "boxes"
    d.mkdir()
    yield d
    assert os.listdir(d) == [], "a sandbox work dir was left behind"
