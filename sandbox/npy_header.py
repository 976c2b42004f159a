"""The header of a NumPy .npy stream, read without its data: uploads and generator outputs are
judged by their declared shape and dtype before anything is allocated."""

from __future__ import annotations

from typing import BinaryIO

import numpy as np


def read_header(handle: BinaryIO) -> tuple[tuple[int, ...], bool, np.dtype]:
    """Shape, Fortran order and dtype; the handle is left at the first byte of data.

    Raises ValueError for anything but an .npy header of format 1.0 or 2.0.
    """
    fmt = np.lib.format
    version = fmt.read_magic(handle)
    if version == (1, 0):
        return fmt.read_array_header_1_0(handle)
    if version == (2, 0):
        return fmt.read_array_header_2_0(handle)
    raise ValueError(f"unsupported .npy format version {version}")


def is_plain_numbers(dtype: np.dtype) -> bool:
    """Booleans, integers or floats: no objects (pickles), records or strings."""
    return not dtype.hasobject and dtype.fields is None and dtype.kind in "biuf"
