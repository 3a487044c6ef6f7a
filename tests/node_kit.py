"""Node, the JavaScript oracle: a test that needs it skips without it, except under CI=true,
where a missing node is a failure (.ci/run installs it), so CI never silently drops the oracle."""

from __future__ import annotations

import os
import shutil

import pytest

NODE = shutil.which("node")
IN_CI = os.environ.get("CI") == "true"


def require_node(why: str) -> str:
    """The path of node; without it, skip (locally) or fail (CI=true)."""
    if NODE is not None:
        return NODE
    if IN_CI:
        pytest.fail(f"node is missing under CI=true ({why}); .ci/run installs it with apt-get")
    pytest.skip(why)
