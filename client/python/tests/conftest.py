from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conformance_runner import Environment, capabilities, setup  # noqa: E402


@pytest.fixture(scope="session")
def env() -> Environment:
    return Environment.from_environ()


@pytest.fixture(scope="session")
def caps(env: Environment) -> set[str]:
    setup(env)
    return capabilities(env)


@pytest.fixture(scope="session")
def dsn() -> str:
    return os.environ.get("DLOCK_CONFORMANCE_DSN", "")
