"""Runs the PaSST, CLAP and CLAP-text tests against the reference packages themselves.

hear21passt, laion_clap, transformers and tokenizers install beside the platform's torch only
without their dependencies, and then do not import as they are: hear21passt and laion_clap
import torchaudio, whose compiled library is built for one torch release, laion_clap's package
imports torchvision and the Hugging Face hub at its top, and transformers stops at a torchaudio
it finds but cannot load. The parts the tests compare with need none of that: hear21passt's mel
front end calls only torchaudio's pure-Python Kaldi mel banks, its network nothing of timm but a
download helper; laion_clap's HTSAT needs torchlibrosa only. This script puts stand-ins in their
place (the Kaldi module loaded from torchaudio's own source file, empty modules for the rest) and
runs the tests, whose comparisons then run instead of skipping. Not part of the test suite: it
needs those packages, in an environment of its own that also sees the platform's packages.

    python -m venv /tmp/ref
    echo "$PWD/.venv/lib/python3.11/site-packages" > /tmp/ref/lib/python3.11/site-packages/platform.pth
    /tmp/ref/bin/pip install --no-deps hear21passt laion_clap torchlibrosa torchaudio timm \\
        transformers tokenizers huggingface_hub httpx2 httpcore2 safetensors
    DATABASE_URL=... /tmp/ref/bin/python scripts/crosscheck_reference_embeddings.py
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _module(name: str, package: bool = False, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=package)
    if package:
        module.__path__ = []
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def stand_ins() -> None:
    """Stand-ins for what the reference networks import but do not use (pytest plugin hook)."""
    import torch

    audio = importlib.util.find_spec("torchaudio")
    if audio is None or audio.submodule_search_locations is None:
        raise SystemExit("torchaudio's sources are needed (pip install --no-deps torchaudio)")
    kaldi_file = Path(next(iter(audio.submodule_search_locations))) / "compliance" / "kaldi.py"

    class Identity(torch.nn.Module):
        def __init__(self, *args, **kwargs):
            super().__init__()

        def forward(self, x):
            return x

    torchaudio = _module("torchaudio", package=True)
    torchaudio.transforms = _module(
        "torchaudio.transforms", FrequencyMasking=Identity, TimeMasking=Identity
    )
    torchaudio.compliance = _module("torchaudio.compliance", package=True)
    spec = importlib.util.spec_from_file_location("torchaudio.compliance.kaldi", kaldi_file)
    kaldi = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = kaldi
    spec.loader.exec_module(kaldi)
    torchaudio.compliance.kaldi = kaldi
    _module("timm", package=True)
    _module("timm.models", package=True)
    _module("timm.models.hub", download_cached_file=None)
    _module("torchvision", package=True)
    _module("torchvision.ops", package=True)
    _module("torchvision.ops.misc", FrozenBatchNorm2d=torch.nn.BatchNorm2d)
    clap = importlib.util.find_spec("laion_clap")
    if clap is not None:  # its package imports the training code and the hub; HTSAT needs neither
        folder = next(iter(clap.submodule_search_locations))
        _module("laion_clap", package=True).__path__ = [folder]
        _module("laion_clap.clap_module", package=True).__path__ = [f"{folder}/clap_module"]


def blocked() -> None:
    """torchaudio and torchvision unimportable, so transformers leaves them alone."""
    sys.modules["torchaudio"] = None
    sys.modules["torchvision"] = None


def pytest_configure(config) -> None:
    {"stand-ins": stand_ins, "blocked": blocked}[config.getoption("crosscheck")]()


def pytest_addoption(parser) -> None:
    parser.addoption("--crosscheck", default="stand-ins")


def main() -> int:
    runs = [
        (
            "stand-ins",
            [
                "tests/stimuli/objective/test_embeddings_passt.py",
                "tests/stimuli/objective/test_embeddings_clap.py",
            ],
        ),
        ("blocked", ["tests/stimuli/objective/test_prompt_scores.py"]),
    ]
    worst = 0
    for mode, files in runs:
        command = [sys.executable, "-m", "pytest", "-p", "crosscheck_reference_embeddings",
                   "-p", "no:xdist", "-q", "-rs", f"--crosscheck={mode}", *files]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'scripts'}:{ROOT}"}
        worst = max(worst, subprocess.run(command, cwd=ROOT, env=env).returncode)
    return worst


if __name__ == "__main__":
    sys.exit(main())
