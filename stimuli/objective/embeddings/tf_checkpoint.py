"""The variables of a TensorFlow checkpoint, read without TensorFlow.

Google released VGGish as `vggish_model.ckpt`, a checkpoint in TensorFlow's first format (V1:
one file). Installing TensorFlow on every worker only to read it once would cost more than the
format: both checkpoint formats are a LevelDB-style sorted table whose values are small
protocol-buffer messages.

- V1 (`Saver(write_version=1)`, one file): the entry with the empty key describes every tensor
  (name, shape, type, the slices saved); every other entry holds one slice with its values
  inline (`float_val` and friends, or `tensor_content`). Slices of a partitioned variable are put
  back together.
- V2 (`<prefix>.index` and `<prefix>.data-NNNNN-of-NNNNN`): the index maps each name to its
  type, shape, shard, offset and size in a data file holding the raw little-endian bytes.
  Partitioned variables of a V2 checkpoint are left out.

Only numeric tensors are returned (strings, such as TF2's object graph, are left out). The
tables' blocks must be uncompressed, which is how TensorFlow writes checkpoints.
"""

from __future__ import annotations

import math
import mmap
from collections.abc import Iterator
from pathlib import Path

import numpy as np

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
# tensorflow/core/framework/types.proto: the numeric types a checkpoint of weights holds.
DTYPES = {
    1: np.float32,
    2: np.float64,
    3: np.int32,
    4: np.uint8,
    5: np.int16,
    6: np.int8,
    9: np.int64,
    10: np.bool_,
    14: np.dtype("V2"),  # bfloat16: two bytes each, widened to float32 below
    17: np.uint16,
    19: np.float16,
    22: np.uint32,
    23: np.uint64,
}
BFLOAT16 = 14
# TensorProto's repeated value fields by type (field number, wire encoding).
VALUE_FIELDS = {1: (5, "<f4"), 2: (6, "<f8"), 19: (13, "varint"), 14: (13, "varint")}
INTEGER_FIELDS = {3: 7, 4: 7, 5: 7, 6: 7, 17: 7, 9: 10, 10: 11, 22: 17, 23: 18}


class CheckpointError(ValueError):
    """The file is not a TensorFlow checkpoint this reader understands."""


def is_checkpoint(path: Path) -> bool:
    """A V1 checkpoint file, a V2 `.index` file, or a V2 prefix with its index beside it."""
    path = Path(path)
    if path.suffix == ".index" or Path(f"{path}.index").is_file():
        return True
    return path.is_file() and _ends_with_table_magic(path)


def read_checkpoint(path: str | Path) -> dict[str, np.ndarray]:
    """Every numeric variable of the checkpoint at `path`, by name."""
    path = Path(path)
    index = path if path.suffix == ".index" else Path(f"{path}.index")
    if index.is_file():
        return _read_v2(index)
    if not path.is_file():
        raise CheckpointError(f"{path} does not exist")
    return _read_v1(path)


# --- protocol buffers: only the wire format is needed ---


def _varint(buf, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise CheckpointError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise CheckpointError("varint longer than 64 bits")


def _fields(buf) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of a message: ints for varints, bytes otherwise."""
    pos, end = 0, len(buf)
    while pos < end:
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        else:
            raise CheckpointError(f"unsupported protocol-buffer wire type {wire}")
        if pos > end:
            raise CheckpointError("truncated protocol-buffer message")
        yield number, wire, value


def _message(buf) -> dict[int, list]:
    fields: dict[int, list] = {}
    for number, _wire, value in _fields(buf):
        fields.setdefault(number, []).append(value)
    return fields


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _shape(buf) -> tuple[int, ...]:
    """TensorShapeProto: dim = 2 (each: size = 1)."""
    return tuple(_signed(_message(dim).get(1, [0])[0]) for dim in _message(buf).get(2, []))


# --- the sorted table (LevelDB's format, as TensorFlow writes it) ---


def _ends_with_table_magic(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        if handle.tell() < FOOTER_SIZE:
            return False
        handle.seek(-8, 2)
        return int.from_bytes(handle.read(8), "little") == TABLE_MAGIC


def _block(data, offset: int, size: int):
    if offset + size + 5 > len(data):
        raise CheckpointError("a table block runs past the end of the file")
    if data[offset + size] != 0:
        raise CheckpointError("compressed table blocks are not supported")
    return data[offset : offset + size]


def _block_entries(block) -> Iterator[tuple[bytes, memoryview]]:
    restarts = int.from_bytes(block[-4:], "little")
    end = len(block) - 4 - 4 * restarts
    if end < 0:
        raise CheckpointError("corrupt table block")
    pos, key = 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        unshared, pos = _varint(block, pos)
        size, pos = _varint(block, pos)
        key = key[:shared] + bytes(block[pos : pos + unshared])
        pos += unshared
        yield key, block[pos : pos + size]
        pos += size


def _table(data) -> Iterator[tuple[bytes, memoryview]]:
    """All (key, value) entries of a table held in `data` (bytes or a memory map)."""
    if len(data) < FOOTER_SIZE or int.from_bytes(data[-8:], "little") != TABLE_MAGIC:
        raise CheckpointError("not a TensorFlow checkpoint table (no table magic number)")
    footer = data[-FOOTER_SIZE:]
    pos = 0
    for _ in range(2):  # the meta-index handle, unused
        _, pos = _varint(footer, pos)
    index_offset, pos = _varint(footer, pos)
    index_size, pos = _varint(footer, pos)
    for _key, handle in _block_entries(_block(data, index_offset, index_size)):
        offset, next_pos = _varint(handle, 0)
        size, _ = _varint(handle, next_pos)
        yield from _block_entries(_block(data, offset, size))


def _mapped(path: Path):
    with open(path, "rb") as handle:
        if handle.seek(0, 2) == 0:
            raise CheckpointError(f"{path} is empty")
        return memoryview(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ))


# --- tensors ---


def _widen(values: np.ndarray, dtype_code: int) -> np.ndarray:
    if dtype_code == BFLOAT16:
        # bfloat16 is the upper half of a float32.
        return (values.view("<u2").astype(np.uint32) << 16).view(np.float32)
    return values


def _tensor_values(proto, dtype_code: int) -> np.ndarray:
    """The values of a TensorProto, flat."""
    fields = _message(proto)
    dtype = np.dtype(DTYPES[dtype_code])
    if 4 in fields:  # tensor_content: raw little-endian bytes
        return _concatenated(fields[4], dtype.newbyteorder("<")).astype(dtype, copy=False)
    if dtype_code in VALUE_FIELDS:
        number, encoding = VALUE_FIELDS[dtype_code]
        if encoding == "varint":  # half and bfloat16 travel as their bit patterns in int32s
            bits = _integers(fields.get(number, []))
            return np.asarray(bits, dtype="<u2").view(dtype)
        return _concatenated(fields.get(number, []), np.dtype(encoding)).astype(dtype, copy=False)
    values = _integers(fields.get(INTEGER_FIELDS[dtype_code], []))
    return np.asarray([_signed(v) for v in values]).astype(dtype)


def _concatenated(parts: list, dtype: np.dtype) -> np.ndarray:
    """Packed values (memory views into the file), copied once into one array."""
    if len(parts) == 1:
        return np.frombuffer(parts[0], dtype=dtype).copy()
    return np.frombuffer(b"".join(bytes(part) for part in parts), dtype=dtype)


def _integers(parts: list) -> list[int]:
    """Repeated integers, packed (bytes) or not (ints)."""
    out: list[int] = []
    for part in parts:
        if isinstance(part, int):
            out.append(part)
            continue
        pos = 0
        while pos < len(part):
            value, pos = _varint(part, pos)
            out.append(value)
    return out


def _slice_index(buf, shape: tuple[int, ...]) -> tuple[slice, ...]:
    """TensorSliceProto (extent = 1, each: start = 1, length = 2; none: the whole axis)."""
    extents = _message(buf).get(1, [])
    index = []
    for axis, size in enumerate(shape):
        extent = _message(extents[axis]) if axis < len(extents) else {}
        start = _signed(extent.get(1, [0])[0])
        length = _signed(extent[2][0]) if 2 in extent else size - start
        index.append(slice(start, start + length))
    return tuple(index)


def _read_v1(path: Path) -> dict[str, np.ndarray]:
    data = _mapped(path)
    try:
        return _parse_v1(data)
    except (KeyError, IndexError, UnicodeDecodeError, TypeError) as exc:
        # A field a well-formed checkpoint always has is absent or of the wrong kind.
        raise CheckpointError(f"{path} holds a malformed checkpoint entry ({exc!r})") from exc
    finally:
        data.release()


def _parse_v1(data) -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {}
    kinds: dict[str, int] = {}
    for key, value in _table(data):
        message = _message(value)
        if key == b"":  # SavedTensorSlices.meta: SavedSliceMeta per tensor
            for meta in _message(message[1][0]).get(1, []):
                fields = _message(meta)
                name = bytes(fields[1][0]).decode("utf8")
                dtype_code = fields.get(3, [0])[0]
                if dtype_code in DTYPES:
                    shape = _shape(fields[2][0]) if 2 in fields else ()
                    # Every saved value takes at least a byte of the file.
                    if min(shape, default=0) < 0 or math.prod(shape) > len(data):
                        raise CheckpointError(f"{name}: impossible shape {shape}")
                    kinds[name] = dtype_code
                    tensors[name] = np.zeros(shape, dtype=DTYPES[dtype_code])
            continue
        saved = _message(message[2][0])  # SavedTensorSlices.data: SavedSlice
        name = bytes(saved[1][0]).decode("utf8")
        if name not in tensors:
            continue
        target = tensors[name]
        region = _slice_index(saved[2][0], target.shape) if 2 in saved else ()
        count = target[region].size
        values = _tensor_values(saved[3][0], kinds[name])
        if values.size != count:
            raise CheckpointError(f"{name}: {values.size} values for {count} places")
        target[region] = values.reshape(target[region].shape)
    return {name: _widen(value, kinds[name]) for name, value in sorted(tensors.items())}


def _read_v2(index: Path) -> dict[str, np.ndarray]:
    prefix = str(index)[: -len(".index")]
    data = _mapped(index)
    entries = []
    shards = 1
    try:
        for key, value in _table(data):
            fields = _message(value)
            if key == b"":  # BundleHeaderProto: num_shards = 1
                shards = fields.get(1, [1])[0]
                continue
            if key.startswith(b"\x00"):
                continue  # one slice of a partitioned tensor (an ordered-code key)
            entries.append((key.decode("utf8"), fields))
    finally:
        data.release()
    files: dict[int, memoryview] = {}
    tensors: dict[str, np.ndarray] = {}
    try:
        for name, fields in entries:
            dtype_code = fields.get(1, [0])[0]
            if dtype_code not in DTYPES:
                continue
            if 7 in fields:
                continue  # partitioned: left out (module docstring)
            shard = fields.get(3, [0])[0]
            shape = _shape(fields[2][0]) if 2 in fields else ()
            offset, size = fields.get(4, [0])[0], fields.get(5, [0])[0]
            if shard not in files:
                shard_path = Path(f"{prefix}.data-{shard:05d}-of-{shards:05d}")
                if not shard_path.is_file():
                    raise CheckpointError(f"{shard_path} is missing")
                files[shard] = _mapped(shard_path)
            raw = files[shard][offset : offset + size]
            dtype = np.dtype(DTYPES[dtype_code]).newbyteorder("<")
            if len(raw) != size or size != dtype.itemsize * math.prod(shape):
                raise CheckpointError(f"{name}: {size} bytes do not make a {shape} tensor")
            value = np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="))
            tensors[name] = _widen(value.reshape(shape), dtype_code)
    finally:
        for view in files.values():
            view.release()
    return dict(sorted(tensors.items()))
