"""Fault-injection and bad-input tests: the tiny run configuration of the integration tests."""

from __future__ import annotations

from tests.integration.conftest import FIXTURES, tiny, tiny_overrides  # noqa: F401
