"""An editable install wins over the clone's folder: Python started in the folder that holds a clone named
`probing` (where `git clone` leaves you) imports the package, not the clone as an empty namespace package."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO


@pytest.mark.skipif(importlib.util.find_spec("setuptools") is None or importlib.util.find_spec("pip") is None,
                    reason="needs pip and setuptools to install the package")
def test_import_from_the_folder_holding_the_clone_finds_the_package(tmp_path):
    clone = tmp_path / "probing"  # a clone is named after the repository
    clone.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, clone / name)
    shutil.copytree(REPO / "probing", clone / "probing", ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    # The environment's own packages stay visible (no network, no dependencies installed); the venv's editable
    # install of the copy comes first.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "-e", str(clone)], check=True, capture_output=True)
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([str(python), "-c", "import probing; print(probing.__file__); print(probing.run.__name__)"],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(clone / "probing" / "__init__.py"), "run"]
