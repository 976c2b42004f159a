"""TensorFlow checkpoints read without TensorFlow: the format of Google's released VGGish.

The small checkpoints in tests/embedding_fixtures/tf_checkpoints were written by TensorFlow
itself (make_checkpoints.py there). A full-size VGGish checkpoint cannot be committed (288 MB),
so one is written here in the same V1 layout from a random network, and VGGish loaded from it
must give exactly the embeddings of the same network loaded from torchvggish's .pth.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from stimuli.objective.embeddings import vggish
from stimuli.objective.embeddings.base import WeightsMissing
from stimuli.objective.embeddings.tf_checkpoint import (
    TABLE_MAGIC,
    CheckpointError,
    is_checkpoint,
    read_checkpoint,
)
from tests import TESTS_DIR

FIXTURES = TESTS_DIR / "embedding_fixtures" / "tf_checkpoints"
CONV1 = (np.arange(36, dtype=np.float32).reshape(3, 3, 1, 4) - 17.5) / 8
BIASES = np.array([1.5, -2.0, 3.0, 0.25], dtype=np.float32)
FC2 = np.sin(np.arange(50 * 7, dtype=np.float32)).reshape(50, 7)
FC1 = np.cos(np.arange(60, dtype=np.float32)).reshape(10, 6)


@pytest.mark.parametrize("name", ["v1.ckpt", "v2.ckpt", "v2.ckpt.index"])
def test_reads_what_tensorflow_wrote(name) -> None:
    path = FIXTURES / name
    assert is_checkpoint(path)
    tensors = read_checkpoint(path)
    np.testing.assert_array_equal(tensors["vggish/conv1/weights"], CONV1)
    np.testing.assert_array_equal(tensors["vggish/conv1/biases"], BIASES)
    np.testing.assert_array_equal(tensors["vggish/fc2/weights"], FC2)
    assert tensors["vggish/fc2/weights"].dtype == np.float32
    assert tensors["scale"].dtype == np.float64 and tensors["scale"] == -0.125
    assert tensors["global_step"].dtype == np.int64 and tensors["global_step"] == -42
    if name == "v1.ckpt":
        # Saved as two slices of five rows; put back together.
        np.testing.assert_array_equal(tensors["vggish/fc1/weights"], FC1)
    else:
        assert "vggish/fc1/weights" not in tensors  # partitioned in V2: left out, documented


def test_other_files_are_not_checkpoints(tmp_path) -> None:
    pth = tmp_path / "weights.pth"
    torch.save({"a": torch.zeros(3)}, pth)
    tiny = tmp_path / "tiny.ckpt"
    tiny.write_bytes(b"\x00" * 10)
    assert not is_checkpoint(pth) and not is_checkpoint(tiny)
    assert not is_checkpoint(tmp_path / "absent.ckpt")
    with pytest.raises(CheckpointError, match="no table magic"):
        read_checkpoint(pth)
    with pytest.raises(CheckpointError, match="does not exist"):
        read_checkpoint(tmp_path / "absent.ckpt")


def test_damaged_checkpoints_give_clear_errors(tmp_path) -> None:
    data = (FIXTURES / "v1.ckpt").read_bytes()
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(data[:200] + data[-48:])  # the footer points past the end now
    with pytest.raises(CheckpointError):
        read_checkpoint(cut)
    # A block marked as compressed (TensorFlow never compresses checkpoints).
    handles, pos = [], len(data) - 48
    for _ in range(4):  # the meta-index block's offset and size, then the index block's
        value, pos = _varint(data, pos)
        handles.append(value)
    index_offset, index_size = handles[2:]
    squeezed = bytearray(data)
    squeezed[index_offset + index_size] = 1
    marked = tmp_path / "snappy.ckpt"
    marked.write_bytes(bytes(squeezed))
    with pytest.raises(CheckpointError, match="compressed"):
        read_checkpoint(marked)
    # A V2 index whose data file is missing.
    (tmp_path / "v2.ckpt.index").write_bytes((FIXTURES / "v2.ckpt.index").read_bytes())
    with pytest.raises(CheckpointError, match=r"v2\.ckpt\.data-00000-of-00001 is missing"):
        read_checkpoint(tmp_path / "v2.ckpt")


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


# --- a V1 checkpoint of VGGish's shapes, laid out as TensorFlow's Saver V1 writes one ---


def _v(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _v(number << 3 | 2) + _v(len(payload)) + payload


def _block(entries: list[tuple[bytes, bytes]]) -> bytes:
    body = b"".join(_v(0) + _v(len(k)) + _v(len(v)) + k + v for k, v in entries)
    return body + struct.pack("<II", 0, 1)  # one restart point, at 0


def write_v1_checkpoint(
    path: Path, variables: dict[str, np.ndarray], shapes: dict[str, tuple] | None = None
) -> None:
    """float32 variables as SavedTensorSlices in a sorted table; `shapes` overrides the shapes
    the file declares (to make damaged files)."""
    metas = b""
    entries = []
    for name, value in sorted(variables.items()):
        declared = (shapes or {}).get(name, value.shape)
        shape = b"".join(_field(2, _v(1 << 3) + _v(size)) for size in declared)
        metas += _field(
            1, _field(1, name.encode()) + _field(2, shape) + b"\x18\x01" + _field(4, b"")
        )
        tensor = b"\x08\x01" + _field(5, value.astype("<f4").tobytes())
        saved = _field(1, name.encode()) + _field(2, b"") + _field(3, tensor)
        entries.append((b"\x00" + name.encode(), _field(2, saved)))
    entries.insert(0, (b"", _field(1, metas)))
    write_table(path, entries)


def write_table(path: Path, entries: list[tuple[bytes, bytes]]) -> None:
    """A sorted table as TensorFlow lays it out, one data block per entry."""
    out = bytearray()
    index = []
    for key, value in entries:
        block = _block([(key, value)])
        index.append((key, _v(len(out)) + _v(len(block))))
        out += block + b"\x00\x00\x00\x00\x00"  # not compressed; checksum not checked
    meta_handle = _v(len(out)) + _v(8)
    out += _block([]) + b"\x00" * 5
    index_handle = _v(len(out)) + _v(len(_block(index)))
    out += _block(index) + b"\x00" * 5
    footer = (meta_handle + index_handle).ljust(40, b"\x00") + struct.pack("<Q", TABLE_MAGIC)
    path.write_bytes(bytes(out) + footer)


def test_hostile_entries_are_refused_before_any_allocation(tmp_path) -> None:
    bomb = tmp_path / "bomb.ckpt"
    write_v1_checkpoint(bomb, {"x": np.zeros(3, np.float32)}, shapes={"x": (1 << 40, 1 << 20)})
    with pytest.raises(CheckpointError, match="x: impossible shape"):
        read_checkpoint(bomb)
    short = tmp_path / "short.ckpt"
    write_v1_checkpoint(short, {"x": np.zeros(3, np.float32)}, shapes={"x": (4,)})
    with pytest.raises(CheckpointError, match="x: 3 values for 4 places"):
        read_checkpoint(short)
    # A data entry without its values (SavedSlice with a name only).
    meta = _field(1, _field(1, _field(1, b"x") + _field(2, b"") + b"\x18\x01"))
    broken = tmp_path / "broken.ckpt"
    write_table(broken, [(b"", meta), (b"\x00x", _field(2, _field(1, b"x")))])
    with pytest.raises(CheckpointError, match="malformed checkpoint entry"):
        read_checkpoint(broken)


def test_vggish_loads_googles_checkpoint_format(tmp_path) -> None:
    random_model = vggish.load_model("random", device="cpu")
    state = random_model.net.state_dict()
    variables = {}
    for scope, layer in vggish.TF_LAYERS.items():
        weight = state[f"{layer}.weight"].numpy()
        axes = (2, 3, 1, 0) if weight.ndim == 4 else (1, 0)
        variables[f"{scope}/weights"] = weight.transpose(axes)
        variables[f"{scope}/biases"] = state[f"{layer}.bias"].numpy()
    variables["vggish/fc3/weights"] = np.zeros((128, 527), np.float32)  # a classifier: ignored
    ckpt = tmp_path / "vggish_model.ckpt"
    write_v1_checkpoint(ckpt, variables)
    assert read_checkpoint(ckpt).keys() == variables.keys()

    loaded = vggish.load_model(str(ckpt), device="cpu")
    for name, value in state.items():
        torch.testing.assert_close(loaded.net.state_dict()[name], value, rtol=0, atol=0)
    assert len(loaded.weights_id) == 12 and loaded.options_id == "hop0.96-act0-raw"
    audio = np.sin(np.linspace(0, 3000, 3 * 16000)).astype(np.float32)[None]
    np.testing.assert_array_equal(
        vggish.embed_batch(audio, 16000, loaded), vggish.embed_batch(audio, 16000, random_model)
    )

    # Postprocessing finds Google's PCA file beside the checkpoint, as released.
    with pytest.raises(WeightsMissing, match="vggish_pca_params"):
        vggish.load_model(str(ckpt), device="cpu", postprocess=True)
    rng = np.random.default_rng(1)
    np.savez(
        tmp_path / "vggish_pca_params.npz",
        pca_eigen_vectors=np.linalg.qr(rng.normal(size=(128, 128)))[0],
        pca_means=rng.normal(size=(128, 1)),
    )
    post = vggish.load_model(str(ckpt), device="cpu", postprocess=True)
    quantised = vggish.embed_batch(audio, 16000, post)
    assert quantised.min() >= 0 and quantised.max() <= 255
    assert np.array_equal(quantised, np.round(quantised))


def test_incomplete_checkpoint_names_the_missing_layers(tmp_path) -> None:
    ckpt = tmp_path / "partial.ckpt"
    write_v1_checkpoint(ckpt, {"vggish/conv1/weights": CONV1, "vggish/conv1/biases": BIASES})
    with pytest.raises(ValueError, match=r"holds no complete VGGish: it lacks features\.3\.weight"):
        vggish.load_model(str(ckpt), device="cpu")
    # A V2 checkpoint named by its prefix is read from its .index and data files.
    with pytest.raises(ValueError, match=r"v2\.ckpt\.index holds no complete VGGish"):
        vggish.load_model(str(FIXTURES / "v2.ckpt"), device="cpu")
    with pytest.raises(WeightsMissing, match=r"vggish_model\.ckpt"):
        vggish.load_model(str(tmp_path / "none.ckpt"), device="cpu")
