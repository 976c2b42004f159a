"""Runs the Audiobox Aesthetics tests against the reference package itself.

audiobox_aesthetics installs beside the platform's torch only without its dependencies, and
then does not import as it is: its `infer` module imports torchaudio, whose compiled library is
built for one torch release, and its model the Hugging Face hub. What the tests compare with,
`AesPredictor` on tensors, calls of torchaudio only `functional.resample`, which is pure torch:
this script loads torchaudio's `functional` package from its own source files in place of the
package (with a stand-in for the compiled extension's flag) and runs the tests, whose
comparisons then run instead of skipping and print their largest differences. Not part of the
test suite: it needs those packages, in an environment of its own that also sees the platform's
packages.

    python -m venv /tmp/aesref
    echo "$PWD/.venv/lib/python3.11/site-packages" > /tmp/aesref/lib/python3.11/site-packages/platform.pth
    /tmp/aesref/bin/pip install --no-deps audiobox_aesthetics torchaudio huggingface_hub \\
        httpx2 httpcore2 truststore
    /tmp/aesref/bin/python scripts/crosscheck_reference_predictors.py
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

from crosscheck_reference_embeddings import _module  # the scripts' folder is on the path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/stimuli/objective/test_aesthetics.py"]


def _from_source(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def stand_ins() -> None:
    """torchaudio as its pure-Python `functional` package alone (pytest plugin hook)."""
    audio = importlib.util.find_spec("torchaudio")
    if audio is None or audio.submodule_search_locations is None:
        raise SystemExit("torchaudio's sources are needed (pip install --no-deps torchaudio)")
    folder = Path(next(iter(audio.submodule_search_locations))) / "functional"
    torchaudio = _module("torchaudio", package=True)
    # Without the compiled library, torchaudio's filters fall back to their Python loops.
    torchaudio._extension = _module("torchaudio._extension", _IS_TORCHAUDIO_EXT_AVAILABLE=False)
    functional = _module("torchaudio.functional", package=True)
    functional.__path__ = [str(folder)]
    torchaudio.functional = functional
    _from_source("torchaudio.functional.filtering", folder / "filtering.py")
    source = _from_source("torchaudio.functional.functional", folder / "functional.py")
    functional.resample = source.resample


def pytest_configure(config) -> None:
    stand_ins()


def main() -> int:
    command = [sys.executable, "-m", "pytest", "-p", "crosscheck_reference_predictors",
               "-p", "no:xdist", "-p", "no:cacheprovider", "-q", "-rsP", *TESTS]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'scripts'}:{ROOT}"}
    return subprocess.run(command, cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
