"""The conformance scenarios (client/conformance) with the Python client, and
their negative controls, each of which this runner must fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance_runner import CONFORMANCE_DIR, Environment, load, run_scenario, skips

SCENARIOS = sorted((CONFORMANCE_DIR / "scenarios").glob("*.json"))
NEGATIVE = sorted((CONFORMANCE_DIR / "negative").glob("*.json"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario(path: Path, env: Environment, caps: set[str]) -> None:
    result = run_scenario(load(path), env, caps, skips())
    if result.status == "skipped":
        pytest.skip(result.detail)
    assert result.status == "passed", result.detail


@pytest.mark.parametrize("path", NEGATIVE, ids=lambda p: p.stem)
def test_negative_control_is_caught(path: Path, env: Environment, caps: set[str]) -> None:
    scenario = load(path)
    result = run_scenario(scenario, env, caps)
    if result.status == "skipped":
        pytest.skip(result.detail)
    assert result.status == "failed", "the runner passed a scenario with a wrong expectation"
    # Caught for the planted reason, not for a fault of the runner's own.
    assert result.detail.startswith(f"step {scenario['fails_at_step']} "), result.detail
    print(f"caught as expected: {result.detail}")
