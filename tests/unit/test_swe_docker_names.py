"""The SWE Docker backend's pure parts: which image an instance runs in (upstream's names), the diff command, the
options from the trainer's flags, and refusals at start instead of at the first episode."""

from __future__ import annotations

import dataclasses
import shlex
from argparse import Namespace

import pytest

import generate_with_swe_remote as agent
from slime.agentic.swe.docker_backend import DockerSweBackend, diff_command, instance_image, shipped_project
from slime.agentic.swe.instances import SHIPPED_INSTANCES, load_instances
from slime.agentic.swe.provider import SweProvider


@pytest.fixture(scope="module")
def shipped():
    return load_instances(SHIPPED_INSTANCES)[0]


def row(shipped, **changes):
    return dataclasses.replace(shipped, **{"repo": "django/django", "version": None, **changes})


def test_swe_bench_and_swe_gym_names_as_upstream_builds_them(shipped):
    django = row(shipped, instance_id="django__django-11099")
    assert instance_image(django) == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    assert instance_image(django, "swebench") == instance_image(django)
    assert instance_image(django, "swe-gym") == "xingyaoww/sweb.eval.x86_64.django_s_django-11099:latest"
    upper = row(shipped, instance_id="Project__Name-1")
    assert instance_image(upper) == "swebench/sweb.eval.x86_64.project_1776_name-1:latest"  # lower-cased
    assert instance_image(django, "registry.local:5000/swe/{instance_id}:v1") == \
        "registry.local:5000/swe/django__django-11099:v1"
    assert instance_image(row(shipped, image_name="mine/img:2"), "swe-gym") == "mine/img:2"  # its own name wins


def test_shipped_instances_default_to_the_base_image_and_foreign_rows_to_swe_bench(shipped):
    assert shipped_project(shipped) is not None and instance_image(shipped) == "slime-terminal-base"
    assert shipped_project(row(shipped)) is None
    with pytest.raises(ValueError, match=shipped.instance_id):
        instance_image(shipped, "Bad Image;rm -rf /")


def test_a_bad_template_or_user_is_refused_when_the_backend_is_made():
    with pytest.raises(ValueError):
        DockerSweBackend("no spaces {instance_id}")
    with pytest.raises(ValueError):
        DockerSweBackend(user="root;id")
    with pytest.raises(ValueError, match="backend must be one of bwrap, docker"):
        SweProvider(backend="podman")


def test_the_diff_is_upstreams_against_the_base_commit_without_caches():
    argv = shlex.split(diff_command("a" * 40))
    assert argv[argv.index("add") + 1] == "-A" and "&&" in argv
    assert ":(exclude,glob)**/__pycache__/**" in argv and argv[-2:] == ["a" * 40, "--"]
    assert {"core.fsmonitor=false", "core.hooksPath=/dev/null"} <= set(argv)  # nothing of the repository's config runs
    assert {"--cached", "--no-ext-diff", "--no-renames"} <= set(argv)


def test_the_trainer_flags_reach_the_swe_provider(monkeypatch):
    seen = {}

    def fake_service(args, provider, options, default_run_dir):
        seen.update(provider=provider, options=options)
        return "http://127.0.0.1:1", None

    monkeypatch.setattr("slime.agentic.env_service.launch.rollout_service", fake_service)
    args = Namespace(swe_instances="rows.jsonl", swe_backend="docker", swe_image="swe-gym", env_server_url=None)
    agent._env_url(args)
    assert seen["provider"] == "swe" and seen["options"]["backend"] == "docker"
    assert seen["options"]["image"] == "swe-gym" and seen["options"]["instances"].endswith("rows.jsonl")
    agent._env_url(Namespace(swe_instances=None, swe_backend=None, swe_image=None, env_server_url=None))
    assert "backend" not in seen["options"] and "image" not in seen["options"]
