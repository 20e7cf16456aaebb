"""Shared helpers of the SDK tests: where the repository and the binary are."""

import os
import pathlib
import unittest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]


def require_binary(testcase_cls=None) -> str:
    """The airlock binary under test (AIRLOCK_BINARY, default
    /tmp/airlock-bin/airlock); skips the tests, saying why, when it is absent."""
    from airlock_client.testing import default_binary

    binary = default_binary()
    if not os.access(binary, os.X_OK):
        raise unittest.SkipTest(f"no airlock binary at {binary} (set AIRLOCK_BINARY)")
    return binary
