"""Runs the PAM tests against msclap, PAM's own code and torchaudio's resampling themselves.

msclap, transformers, tokenizers and torchaudio install beside the platform's torch only without
their dependencies, and then do not import as they are: msclap's packages import torchaudio,
whose compiled library is built for one torch release, and a module the wheel lacks
(`msclap.models` imports `htsataes_src`); PAM's code (the authors' repository soham97/PAM, not
on PyPI) reads audio with torchaudio. The parts the tests compare with need none of that: msclap's
CLAP needs torchlibrosa and transformers' GPT-2, PAM's data loading torchaudio's `load` and
`Resample` only. This script puts stand-ins in their place (msclap's packages without their
`__init__`, `torchaudio.load` reading with soundfile, `Resample` and the functions it calls taken
from torchaudio's own source file) and runs the tests, whose comparisons then run instead of
skipping, and prints the largest difference each found. The GPT-2 and its tokenizer that msclap
and PAM fetch from the Hugging Face hub are built from the test's files instead. Not part of the
test suite: it needs those packages, in an environment of its own that also sees the platform's.

    python -m venv /tmp/pam_ref
    echo "$PWD/.venv/lib/python3.11/site-packages" > /tmp/pam_ref/lib/python3.11/site-packages/platform.pth
    /tmp/pam_ref/bin/pip install --no-deps msclap "transformers<5" "tokenizers<0.23" \\
        "huggingface_hub<1.0" safetensors regex torchlibrosa torchaudio
    # a checkout of soham97/PAM in /tmp/pam
    /tmp/pam_ref/bin/python scripts/crosscheck_reference_predictors_pam.py --pam /tmp/pam
"""

from __future__ import annotations

import argparse
import ast
import importlib.machinery
import importlib.util
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Optional

from crosscheck_reference_embeddings import _module  # the scripts' folder is on the path

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/stimuli/objective/test_pam.py"


def _definitions(path: Path, names: set[str], namespace: dict) -> dict:
    """The named top-level functions and classes of a source file, run in `namespace`."""
    tree = ast.parse(path.read_text("utf-8"))
    body = [n for n in tree.body if getattr(n, "name", None) in names]
    if {n.name for n in body} != names:
        raise SystemExit(f"{path} lacks {names - {n.name for n in body}}")
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec"), namespace)
    return namespace


def stand_ins(pam_source: str) -> None:
    """Stand-ins for what the reference code imports but the compared parts do not use."""
    import soundfile
    import torch

    audio = importlib.util.find_spec("torchaudio")
    if audio is None or audio.submodule_search_locations is None:
        raise SystemExit("torchaudio's sources are needed (pip install --no-deps torchaudio)")
    folder = Path(next(iter(audio.submodule_search_locations)))
    namespace = {"torch": torch, "math": math, "warnings": warnings, "Optional": Optional,
                 "Tensor": torch.Tensor, "_CPU": torch.device("cpu")}  # fmt: skip
    _definitions(
        folder / "functional" / "functional.py",
        {"_get_sinc_resample_kernel", "_apply_sinc_resample_kernel"},
        namespace,
    )
    _definitions(folder / "transforms" / "_transforms.py", {"Resample"}, namespace)

    def load(path, *args, **kwargs):
        data, rate = soundfile.read(path, dtype="float32", always_2d=True)
        return torch.from_numpy(data.T.copy()), rate

    torchaudio = _module("torchaudio", package=True, load=load)
    torchaudio.transforms = _module("torchaudio.transforms", Resample=namespace["Resample"])
    sys.modules["torchvision"] = None
    clap = importlib.util.find_spec("msclap")
    if clap is not None:  # its __init__s import torchaudio and a module the wheel lacks
        base = next(iter(clap.submodule_search_locations))
        _module("msclap", package=True).__path__ = [base]
        _module("msclap.models", package=True).__path__ = [f"{base}/models"]
    if pam_source:
        sys.path.insert(0, str(Path(pam_source).resolve()))


DIFFERENCES: list[tuple[str, str, float]] = []


def pytest_addoption(parser) -> None:
    parser.addoption("--pam-source", default="")


def pytest_configure(config) -> None:
    stand_ins(config.getoption("pam_source"))


def pytest_runtest_logreport(report) -> None:
    if report.when == "call":
        DIFFERENCES.extend((report.nodeid, k, v) for k, v in report.user_properties)


def pytest_terminal_summary(terminalreporter) -> None:
    terminalreporter.section("largest |ours - reference|")
    for nodeid, name, value in DIFFERENCES:
        terminalreporter.write_line(f"{value:.3e}  {name}  ({nodeid.rsplit('::', 1)[-1]})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pam", default="", help="a checkout of soham97/PAM (else skipped)")
    args = parser.parse_args()
    command = [sys.executable, "-m", "pytest", "-p", "crosscheck_reference_predictors_pam",
               "-p", "no:xdist", "-p", "no:cacheprovider", "-q", "-rs",
               f"--pam-source={args.pam}", TEST]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'scripts'}:{ROOT}"}
    return subprocess.run(command, cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
