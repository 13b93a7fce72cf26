"""Tests run offline, and keep automatically built token stores in their own temporary cache."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("CROSSALIGN_CACHE", tempfile.mkdtemp(prefix="crossalign-test-cache-"))
