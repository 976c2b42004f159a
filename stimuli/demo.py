"""The demo challenge: built from its definition file (challenges/demo.yaml) as an organizer would
apply it, with procedurally synthesized reference sets and systems loaded through the same import
path as real uploads, and an organizer account."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from . import definition
from .audio import encode_wav
from .models import Challenge
from .permissions import ORGANIZERS_GROUP, name_owner
from .services import create_system, create_team
from .uploads.imports import import_clips

DEMO_SLUG = "dcase2023-demo"
DEMO_USER = "organizer"
DEMO_PASSWORD = "foley-demo"
# The demo's challenges are defined by these files, as any challenge can be: what the demo sets
# is reviewed, exported and diffed like an organizer's own settings.
CHALLENGES = Path(settings.BASE_DIR) / "challenges"
DEMO_FILE = CHALLENGES / "demo.yaml"
TEXT_DEMO_FILE = CHALLENGES / "demo-text.yaml"


@dataclass
class DemoSummary:
    challenge: Challenge
    username: str
    password: str
    created: bool


def _synthesize(
    category: str, seed: int, *, sample_rate: int, frames: int, tilt: float
) -> np.ndarray:
    """A crude but category-specific sound: shaped noise bursts whose rhythm depends on the category.

    `tilt` changes the spectral balance, so different "systems" are measurably different.
    """
    rng = np.random.default_rng(seed)
    t = np.arange(frames) / sample_rate
    noise = rng.standard_normal(frames)
    spectrum = np.fft.rfft(noise)
    freqs = np.fft.rfftfreq(frames, 1 / sample_rate)
    centre = {
        "dog_bark": 700, "footstep": 250, "gunshot": 1500, "keyboard": 3500,
        "moving_motor_vehicle": 120, "rain": 5000, "sneeze_cough": 1200,
    }.get(category, 1000) * (1 + 0.2 * rng.standard_normal())  # fmt: skip
    shape = np.exp(-0.5 * (np.log((freqs + 1) / centre) / 0.6) ** 2) * (freqs + 1) ** tilt
    colored = np.fft.irfft(spectrum * shape, n=frames)
    rate = {"rain": 0, "moving_motor_vehicle": 0, "keyboard": 7, "footstep": 2}.get(category, 1.2)
    if rate:
        onsets = np.sort(rng.uniform(0, 3.6, size=max(1, rng.poisson(rate * 4))))
        envelope = np.zeros(frames)
        decay = 0.02 if category in ("keyboard", "gunshot") else 0.12
        for onset in onsets:
            envelope += np.where(t >= onset, np.exp(-(t - onset) / decay), 0.0)
    else:
        envelope = 1 + 0.3 * np.sin(2 * np.pi * rng.uniform(0.2, 1) * t)
    sound = colored * envelope
    return 0.5 * sound / (np.max(np.abs(sound)) + 1e-9)


def write_set(root: Path, challenge: Challenge, per_category: int, seed: int, tilt: float) -> Path:
    """A folder per category of synthesized clips, ready for `import_clips`; returns `root`."""
    for index, category in enumerate(challenge.categories.all()):
        folder = root / category.slug
        folder.mkdir(parents=True)
        for n in range(per_category):
            samples = _synthesize(
                category.slug,
                seed * 100_000 + index * 1000 + n,
                sample_rate=challenge.sample_rate,
                frames=challenge.clip_frames,
                tilt=tilt,
            )
            data = encode_wav(samples[:, None], challenge.sample_rate)
            (folder / f"{category.slug}_{n:03d}.wav").write_bytes(data)
    return root


def ensure_organizer(username: str = DEMO_USER, password: str = DEMO_PASSWORD):
    """The demo's organizer: owner of the demo's challenges only, neither staff nor superuser,
    so its well-known password opens nothing else (and a production start refuses it)."""
    user, _ = get_user_model().objects.get_or_create(username=username)
    user.set_password(password)
    user.is_staff = False
    user.is_superuser = False
    user.save()
    user.groups.add(Group.objects.get_or_create(name=ORGANIZERS_GROUP)[0])
    for challenge in Challenge.objects.filter(slug__in=[DEMO_SLUG, TEXT_DEMO_SLUG]):
        name_owner(challenge, user)
    return user


def from_file(path: Path, organizer) -> Challenge:
    """The challenge `path` defines, created by applying the file as `organizer`."""
    applied = definition.apply(path.read_text(), by=organizer)
    return Challenge.objects.get(slug=applied.slug)


@transaction.atomic
def seed_demo(*, per_category: int = 12, system_clips: int = 12) -> DemoSummary:
    """Create the demo challenge once; a second call only resets the organizer's password."""
    user = ensure_organizer()
    existing = Challenge.objects.filter(slug=DEMO_SLUG).first()
    if existing:
        return DemoSummary(existing, user.username, DEMO_PASSWORD, created=False)
    challenge = from_file(DEMO_FILE, user)
    with tempfile.TemporaryDirectory() as scratch:
        # The anchor sources are the organizer's private clips, imported as such (and the
        # evaluation set, equally private): the development set is published, so anchors made
        # of it would be found by any team that matches what it hears against it.
        for role, seed in (("development", 1), ("evaluation", 2), ("anchor", 4)):
            root = Path(scratch) / role
            write_set(root, challenge, per_category, seed=seed, tilt=0.0)
            report = import_clips(challenge, root, role=role)
            assert report.accepted, report.to_dict()
        # Five systems per track with the baseline and its two variants (track B): enough for
        # the embedding league's correlations and stability to say something. Each differs
        # from the references in its spectral tilt, by a measurable amount.
        systems = [
            ("Procedural", "Procedural_A_1", "A", 0.0),
            ("Procedural", "Procedural_B_1", "B", 0.6),
            ("Noise Lab", "NoiseLab_A_1", "A", -0.8),
            ("Noise Lab", "NoiseLab_A_2", "A", -0.3),
            ("Bright Works", "Bright_A_1", "A", 0.3),
            ("Bright Works", "Bright_A_2", "A", 0.9),
            ("Bright Works", "Bright_B_1", "B", -0.4),
        ]
        for n, (team_name, name, track, tilt) in enumerate(systems):
            team = challenge.teams.filter(name=team_name).first() or create_team(
                challenge, name=team_name
            )
            system = create_system(team=team, track=challenge.tracks.get(code=track), name=name)
            root = Path(scratch) / name
            write_set(root, challenge, system_clips, seed=10 + n, tilt=tilt)
            report = import_clips(challenge, root, role="system", system=system)
            assert report.accepted, report.to_dict()
    return DemoSummary(challenge, user.username, DEMO_PASSWORD, created=True)


# --- The text-prompt demo: a described reference set and the baseline's text variant ----------

TEXT_DEMO_SLUG = "text-prompt-demo"
TEXT_DEMO_SYSTEM = "Procedural baseline (text)"
# How the demo's reference clips are described, per category (as a text-audio data set would).
TEXT_DESCRIPTIONS = {
    "dog_bark": ("a dog barks", "a small dog barking twice", "a big dog barking in the distance"),
    "footstep": ("footsteps on a hard floor", "someone walking slowly", "fast steps running"),
    "gunshot": ("a single gunshot", "a rifle fires three shots", "a distant gun shot"),
    "keyboard": ("typing on a keyboard", "fast typing with clicks", "a few keys pressed"),
    "moving_motor_vehicle": ("a car passes by", "a truck engine driving past", "traffic noise"),
    "rain": ("rain falling on a roof", "light drizzle", "a heavy rain storm"),
    "sneeze_cough": ("a person coughs", "a loud sneeze", "someone clearing their throat"),
}


@transaction.atomic
def seed_text_demo(per_category: int = 3) -> tuple[Challenge, bool]:
    """A challenge (challenges/demo-text.yaml) with a described reference set (uploaded with its
    CSV, as an organizer would) and the procedural baseline's text variant as a system; once."""
    from .generators.services import BASELINE_MODULE, set_generator
    from .generators.text_prompts import import_described_clips
    from .models import System

    existing = Challenge.objects.filter(slug=TEXT_DEMO_SLUG).first()
    if existing:
        return existing, False
    # The file sets the study's counts too; its system is added when it opens (raters/demo.py).
    challenge = from_file(TEXT_DEMO_FILE, ensure_organizer())
    with tempfile.TemporaryDirectory() as scratch:
        root = write_set(Path(scratch) / "reference", challenge, per_category, seed=3, tilt=0.0)
        lines = ["file,text"]
        for category in challenge.categories.all():
            texts = TEXT_DESCRIPTIONS[category.slug]
            for n in range(per_category):
                lines.append(f"{category.slug}/{category.slug}_{n:03d}.wav,{texts[n % len(texts)]}")
        import_described_clips(challenge, root, "\n".join(lines) + "\n")
    team = create_team(challenge, name="Organizers")
    system = create_system(
        team=team,
        track=challenge.tracks.get(code="B"),
        name=TEXT_DEMO_SYSTEM,
        kind=System.Kind.GENERATOR,
    )
    # The platform's own code (see create_baseline_systems): validated at once, in-process.
    set_generator(system, module=BASELINE_MODULE, trusted=True)
    return challenge, True
