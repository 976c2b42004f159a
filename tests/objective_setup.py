"""A small challenge with structured audio for objective-evaluation tests, and statistics
files in good and bad shape.

Reference sets and systems are synthesized like the demo's: a system's spectral `tilt` moves it
away from the references (tilt 0), so FAD has a known order.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from stimuli.demo import write_set
from stimuli.models import Challenge, System
from stimuli.objective import config
from stimuli.services import create_challenge, create_system, create_team
from stimuli.uploads.imports import import_clips

SYSTEMS = [("Close", "A", 0.0), ("Far", "A", 1.5), ("Middle", "B", 0.7), ("Farther", "B", 2.0)]


def small_challenge(
    tmp_path: Path,
    *,
    slug: str = "small",
    system_clips: int = 12,
    reference_clips: int = 8,
    systems=SYSTEMS,
    finalists: int = 1,
    medoids: int = 5,
) -> Challenge:
    challenge = create_challenge(
        name="Objective",
        slug=slug,
        # 4 s: the synthesized events fall anywhere in the first 3.6 s.
        categories=[("dog_bark", "Dog bark"), ("rain", "Rain")],
    )
    for role, seed in (("development", 1), ("evaluation", 2)):
        root = write_set(tmp_path / role, challenge, reference_clips, seed, 0.0)
        assert import_clips(challenge, root, role=role).created_clips == 2 * reference_clips
    team = create_team(challenge, name="Team")
    for n, (name, track, tilt) in enumerate(systems):
        system = create_system(team=team, track=challenge.tracks.get(code=track), name=name)
        root = write_set(tmp_path / name, challenge, system_clips, 10 + n, tilt)
        report = import_clips(challenge, root, role="system", system=system)
        assert report.created_clips == 2 * system_clips
    config.set_models(
        challenge,
        fad_model="logmel",
        medoid_model="logmel",
        medoid_model_options={"hop_s": 0.5},
        finalists_per_track=finalists,
        medoids_per_category=medoids,
        kmeans_n_init=3,
    )
    return challenge


def system(challenge: Challenge, name: str) -> System:
    return challenge.systems.get(name=name)


def npz_bytes(**members: bytes | np.ndarray) -> bytes:
    """A zip of .npy members, arrays saved as numpy saves them, bytes as they are."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, value in members.items():
            if isinstance(value, np.ndarray):
                member = io.BytesIO()
                np.save(member, value, allow_pickle=True)
                value = member.getvalue()
            archive.writestr(f"{name}.npy", value)
    return buffer.getvalue()


def npy_header(shape: tuple[int, ...], descr: str = "<f8") -> bytes:
    """Only the header of an .npy, declaring an array that the file does not hold."""
    member = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(member, header)
    return member.getvalue()


def bad_crc() -> bytes:
    raw = bytearray(npz_bytes(mu=np.zeros(128), sigma=np.eye(128)))
    at = raw.index(np.float64(1.0).tobytes())  # sigma[0, 0], inside the zip's stored data
    raw[at + 7] ^= 0xFF
    return bytes(raw)
