"""A generator whose output file declares 2 x 134,217,728 float32 samples (1 GiB) in its .npy
header, with no data behind it: it replaces numpy.save in the runner, as any generator code
could. Nothing of the gigabyte is ever allocated here."""

import numpy as np

from ._common import Model

DECLARED = (2, 134_217_728)


def load_model(path):
    return Model()


def _crafted_save(path, array, allow_pickle=False):
    with open(path, "wb") as handle:
        header = {"descr": "<f4", "fortran_order": False, "shape": DECLARED}
        np.lib.format.write_array_header_1_0(handle, header)
        handle.truncate(handle.tell() + DECLARED[0] * DECLARED[1] * 4)  # sparse: no disk used


def generate(model, category, n, seed):
    np.save = _crafted_save
    return np.zeros((n, 1), dtype=np.float32)
