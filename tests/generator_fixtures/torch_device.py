"""A torch generator that runs where FOLEY_DEVICE says and refuses to fall back to the CPU: a
convolution over seeded noise on that device. Its load fails when CUDA was promised and is not
usable, so a sandbox that hides the GPU from a GPU job fails the job instead of running slowly."""

import os

import numpy as np
import torch

from ._common import Model as Base


class Model(Base):
    def __init__(self):
        super().__init__()
        self.device = os.environ.get("FOLEY_DEVICE", "cpu")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("FOLEY_DEVICE is cuda but CUDA is not usable here")
        generator = torch.Generator().manual_seed(0)
        self.kernel = torch.randn(1, 1, 65, generator=generator).to(self.device) / 8


def load_model(path):
    return Model()


def generate(model, category, n, seed):
    noise = np.stack(
        [np.random.default_rng([seed, i]).standard_normal(model.frames) for i in range(n)]
    ).astype(np.float32)
    x = torch.from_numpy(noise).to(model.device)[:, None]
    with torch.inference_mode():
        y = torch.nn.functional.conv1d(x, model.kernel, padding=32)[:, 0]
    y = 0.5 * y / y.abs().amax(dim=1, keepdim=True)
    print(f"generated on {y.device}", flush=True)  # the generator's log: where it ran
    return y.float().cpu().numpy()
