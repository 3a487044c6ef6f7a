"""The dashboard tests' shared fixtures (helpers that are plain functions stay in
``dashboard_kit.py`` and ``dialog_kit.py``, imported by name)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from dashboard_kit import DEMO_HOST, demo_app_factory
from dialog_kit import make_deterministic

from nexus_tui.app import NexusApp
from nexus_tui.logic.demo import FIXED_START, DemoInfo, build_demo


@pytest.fixture(scope="session")
def frozen_demo(tmp_path_factory: pytest.TempPathFactory) -> DemoInfo:
    """The deterministic demo (fixed start, seed and recorded identity), built once per worker
    by the real core; tests only read it."""
    parent = tmp_path_factory.mktemp("snapshots")
    return build_demo(str(parent / "demo"), start=FIXED_START, seed=5, identity=(4242, DEMO_HOST), with_process=False)


@pytest.fixture
def demo_app(frozen_demo: DemoInfo, monkeypatch: pytest.MonkeyPatch) -> Callable[[], NexusApp]:
    """Apps on the frozen demo, as the snapshots see it (``dashboard_kit.demo_app_factory``)."""
    return demo_app_factory(frozen_demo, monkeypatch)


@pytest.fixture
def deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids, clock and host name fixed for dialog snapshots (``dialog_kit.make_deterministic``)."""
    make_deterministic(monkeypatch)
