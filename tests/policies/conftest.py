"""Fixtures for the policy tests: manifests from text, the shipped ones, the bad example."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.policies.manifest import parse_manifest
from assay.settings import Limits

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def make_manifest():
    return lambda text: parse_manifest(text.encode(), "test.toml")


@pytest.fixture
def limits() -> Limits:
    # Pinned, so no developer's ASSAY_LIMIT_* changes what the tests expect.
    return Limits(timeout_s=60, output_bytes=1 << 20)


@pytest.fixture
def shipped_manifests() -> list[Path]:
    found = sorted((REPO / "policies" / "manifests").glob("*.toml"))
    assert found, "no shipped manifests found"
    return found


@pytest.fixture
def bad_leaky() -> Path:
    return REPO / "examples" / "manifests" / "bad-leaky.toml"
