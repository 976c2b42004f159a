"""A GPU job's generator runs on the GPU inside the sandbox: the NVIDIA device nodes are bound,
CUDA initialises under bubblewrap, the seccomp filter and the cgroup, and the clips match the
same generator's on the CPU. Runs where a GPU is visible (a GPU worker); skipped elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox.process import Limits, Sandbox, cuda_visible, enforcement
from sandbox.source import GeneratorSource

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(
        not (cuda_visible() and torch.cuda.is_available()), reason="needs a CUDA device"
    ),
]

GENERATOR = "tests.generator_fixtures.torch_device"
LIMITS = Limits(load_timeout_s=120, call_timeout_s=60, memory_mb=8192)


def test_a_gpu_job_runs_on_the_gpu_inside_the_sandbox():
    source = GeneratorSource.from_module(GENERATOR)
    with Sandbox(source, limits=LIMITS, use_gpu=True) as sandbox:
        assert sandbox.isolated
        on_gpu = sandbox.generate("rain", 3, 7)
        log = sandbox.log_tail()
    assert "generated on cuda:0" in log, log
    assert enforcement(use_gpu=True)["devices"] == "NVIDIA device nodes bound"

    with Sandbox(source, limits=LIMITS, use_gpu=False) as sandbox:
        on_cpu = sandbox.generate("rain", 3, 7)
        log = sandbox.log_tail()
    assert "generated on cpu" in log, log
    assert on_gpu.shape == on_cpu.shape == (3, 88200)
    # The same convolution on both devices (TF32 may round the GPU's).
    assert np.abs(on_gpu - on_cpu).max() <= 1e-2
