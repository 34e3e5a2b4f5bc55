"""Shared fixtures: the CLI built beside the module, and paths of the tree."""
import json
import os
import pathlib
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("RESHARD_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
DATA_DIR = pathlib.Path(os.environ.get("RESHARD_TEST_DATA_DIR", SOURCE_DIR / "tests" / "data"))
TINY = "tiny-llama-tp2-to-tp1x2"


class Cli:
    """Runs the `reshard` command; json() parses its --json output."""

    def __init__(self, binary):
        self.binary = binary

    def __call__(self, *args, cwd=None):
        return subprocess.run([self.binary, *map(str, args)], capture_output=True, text=True, cwd=cwd)

    def json(self, *args, expect_rc=0, cwd=None):
        r = self(*args, "--json", cwd=cwd)
        assert r.returncode == expect_rc, f"reshard {' '.join(map(str, args))}: exit {r.returncode}\n{r.stderr}"
        return json.loads(r.stdout)


@pytest.fixture(scope="session")
def cli():
    binary = os.environ.get("RESHARD_BINARY")
    if not binary:
        pytest.skip("RESHARD_BINARY is not set (run through ctest)")
    return Cli(binary)


@pytest.fixture(scope="session")
def source_dir():
    return SOURCE_DIR


@pytest.fixture(scope="session")
def data_dir():
    return DATA_DIR
