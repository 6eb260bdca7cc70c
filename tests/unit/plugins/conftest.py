"""Fixtures of the tests that talk to the fake API server (``fake_kube.py``)."""

from __future__ import annotations

import tempfile

import pytest


@pytest.fixture
def discovery_cache(tmp_path, monkeypatch):
    """kubernetes.core's client caches each API server's discovery in the temporary folder: the test's own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
