"""The learned predictors (stimuli/objective/predictors/) as a step of the objective stage, and
as a researcher's tool on a folder of audio.

Each predictor rates one clip as its listeners were trained to, from its released files:
`aesthetics` (Audiobox Aesthetics: PQ, PC, CE and CU on its 1-10 scale) and `pam` (PAM: one
score, 0 to 1). The chosen predictors are loaded before any audio is read, so a missing file
stops the work at once with its error (`WeightsMissing`: the file, its setting and where it is
published; every missing file at once).

- `score_files`: audio files, one row each (the `compute_predictors` command's CSV).
- `score_challenge`: every system clip of a challenge, one `PredictorScore` row per clip and
  axis (the `predictors` job, on the gpu queue). A clip whose rows the same files gave already is
  not scored again, and rows are upserted on their unique key: a second run, or a retry, adds
  nothing and changes nothing.
- `predictor_summary`: per system, category and axis, the mean over the clips with a 95%
  Student's t interval, and the mean on one draw of 25, 50 and 100 clips where there are more
  (the selector the scoring side reads, for the leaderboards and the metric league).

Audio is read as one channel, the mean of its channels (what Audiobox Aesthetics does itself;
PAM scores one channel). torch is imported inside the worker-side functions only.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.utils import timezone

from ..models import AudioFile, Challenge, Clip, PredictorScore
from ..predictor_axes import UNTRAINED_MARK
from .config import SETTLED, ObjectiveError, Progress
from .embeddings.base import WeightsMissing

Rate = Callable[[Any, list[np.ndarray], int], list[dict[str, float]]]


# How a predictor loads: from the device (None: the GPU where there is one) and, where given,
# a folder holding its files under their default names instead of where the settings say; it
# gives the model, the id of its files and its device.
Load = Callable[[str | None, Path | None], tuple[Any, str, str]]


@dataclass(frozen=True)
class Predictor:
    """A predictor by name: its columns (the axes of its rows), how it loads and how it rates
    clips of one sample rate."""

    name: str
    columns: tuple[str, ...]
    load: Load
    rate: Rate


@dataclass(frozen=True)
class Loaded:
    predictor: Predictor
    model: Any
    model_id: str
    device: str


def _setting_path(setting: str, default: str, folder: Path | None = None) -> Path:
    """The file `setting` names, else `default` under FOLEY_MODEL_DIR; `default` under `folder`
    where one is given."""
    if folder is not None:
        return Path(folder) / default
    named = getattr(settings, setting, "")
    return Path(named) if named else Path(settings.FOLEY_MODEL_DIR) / default


def model_id(name: str, files: str, untrained: bool) -> str:
    """`<predictor>@<the files' digests>`, marked where the files are untrained stand-ins, so
    that every value they gave, and every table of them, says so."""
    return f"{name}@{files}" + (f" {UNTRAINED_MARK}" if untrained else "")


def _load_aesthetics(device: str | None, folder: Path | None) -> tuple[Any, str, str]:
    from .predictors import aesthetics

    path = _setting_path(aesthetics.SETTING, aesthetics.DEFAULT_PATH, folder)
    model = aesthetics.load(path, device=device)
    return model, model_id("aesthetics", model.weights_id, model.untrained), str(model.device)


def _rate_aesthetics(model: Any, clips: list[np.ndarray], rate: int) -> list[dict[str, float]]:
    from .predictors import aesthetics

    return aesthetics.predict_clips(model, clips, rate)


def _load_pam(device: str | None, folder: Path | None) -> tuple[Any, str, str]:
    from .embeddings.base import file_digest
    from .predictors import msclap, pam

    weights = _setting_path(pam.WEIGHTS_SETTING, msclap.WEIGHTS_FILE, folder)
    tokenizer = _setting_path(pam.TOKENIZER_SETTING, pam.TOKENIZER_FOLDER, folder)
    model = pam.load(weights, tokenizer, device=device)
    words = file_digest(tokenizer / "vocab.json", 8) + file_digest(tokenizer / "merges.txt", 8)
    files = f"{file_digest(weights)}+{words}"
    return model, model_id("pam", files, model.untrained), str(model.device)


def _rate_pam(model: Any, clips: list[np.ndarray], rate: int) -> list[dict[str, float]]:
    from .predictors import pam

    return [{"PAM": value} for value in pam.scores(model, clips, rate)]


# The predictors by name, in the order of their columns.
PREDICTORS: dict[str, Predictor] = {
    "aesthetics": Predictor(
        "aesthetics", ("PQ", "PC", "CE", "CU"), _load_aesthetics, _rate_aesthetics
    ),
    "pam": Predictor("pam", ("PAM",), _load_pam, _rate_pam),
}


def predictor_names(names: str | Sequence[str] | None = None) -> list[str]:
    """The chosen predictors in their columns' order (all of them by default), from a list or a
    comma-separated string; ObjectiveError naming any that is not one of them."""
    if names is None:
        return list(PREDICTORS)
    wanted = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    wanted = [n for n in wanted if n]
    unknown = [n for n in wanted if n not in PREDICTORS]
    if unknown or not wanted:
        raise ObjectiveError(
            f"unknown predictors: {', '.join(unknown) or 'none named'}; "
            f"the predictors are {', '.join(PREDICTORS)}"
        )
    return [n for n in PREDICTORS if n in wanted]


def columns(names: Sequence[str]) -> list[str]:
    return [c for n in predictor_names(names) for c in PREDICTORS[n].columns]


def load_predictors(
    names: Sequence[str], *, device: str | None = None, folder: Path | None = None
) -> list[Loaded]:
    """The chosen predictors, loaded: from where the settings say, or, with `folder`, from the
    files under their default names there (the demo's stand-ins). WeightsMissing naming every
    missing file at once (each with its setting and where it is published); a file not as
    released raises its own error (a ValueError naming what differs)."""
    loaded, missing = [], []
    for name in predictor_names(names):
        predictor = PREDICTORS[name]
        try:
            model, model_id, on = predictor.load(device, folder)
        except WeightsMissing as exc:
            missing.append(str(exc))
            continue
        loaded.append(Loaded(predictor, model, model_id, on))
    if missing:
        raise WeightsMissing(" ".join(missing))
    return loaded


def _rated(item: Loaded, clips: list[np.ndarray], rate: int, names: Sequence[str]) -> list[dict]:
    """The predictor's values of clips of one rate, every one checked to be a number."""
    values = item.predictor.rate(item.model, clips, rate)
    for name, row in zip(names, values, strict=True):
        for axis in item.predictor.columns:
            if not math.isfinite(row[axis]):
                raise ValueError(f"{item.predictor.name} gave {name} a {axis} of {row[axis]}")
    return values


def read_mono(path: Path) -> tuple[np.ndarray, int]:
    """float32 [samples] of an audio file (the mean of its channels) and its sample rate."""
    import soundfile as sf

    audio, rate = sf.read(path, dtype="float32", always_2d=True)
    return np.ascontiguousarray(audio.mean(axis=1)), int(rate)


# --- a folder of audio (the command) ------------------------------------------------------------


def score_files(
    files: Sequence[Path],
    root: Path,
    loaded: Sequence[Loaded],
    *,
    batch: int = 8,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """One row per file, in the files' order: `path` (relative to `root`) and each loaded
    predictor's columns. ValueError naming a file that is not readable audio."""
    import soundfile as sf

    names = [Path(f).relative_to(root).as_posix() for f in files]
    rates: dict[int, list[int]] = defaultdict(list)
    for i, path in enumerate(files):
        try:
            info = sf.info(path)
        except Exception as exc:  # soundfile raises its own error types
            raise ValueError(f"{names[i]}: not readable audio ({exc})") from None
        if info.frames < 1:
            raise ValueError(f"{names[i]}: no samples")
        rates[int(info.samplerate)].append(i)
    rows: list[dict[str, Any]] = [{"path": name} for name in names]
    done = 0
    for rate, members in rates.items():
        for start in range(0, len(members), batch):
            chunk = members[start : start + batch]
            clips = []
            for i in chunk:
                try:
                    clips.append(read_mono(files[i])[0])
                except Exception as exc:  # soundfile raises its own error types
                    raise ValueError(f"{names[i]}: not readable audio ({exc})") from None
            for item in loaded:
                values = _rated(item, clips, rate, [names[i] for i in chunk])
                for i, value in zip(chunk, values, strict=True):
                    rows[i].update(value)
            done += len(chunk)
            if progress:
                progress(done, len(files), f"scored {done} of {len(files)} files")
    return rows


# --- a challenge's system clips (the job) -------------------------------------------------------


def score_challenge(
    challenge: Challenge,
    loaded: Sequence[Loaded],
    *,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Store each loaded predictor's values of every system clip (one row per clip and axis),
    scoring each distinct sound once; clips whose rows the same files gave already are left.
    Rows are written batch by batch, so a failed run keeps what it stored and the next run
    carries on from there. Returns the job's result (`PredictorsJobResult`)."""
    from .embeddings.store import _read

    system_clips = Clip.objects.filter(SETTLED, challenge=challenge, role=Clip.Role.SYSTEM)
    clips = list(system_clips.order_by("pk"))
    have = Counter(
        PredictorScore.objects.filter(clip__in=system_clips).values_list(
            "clip_id", "predictor", "model_id"
        )
    )
    by_audio: dict[int, list[int]] = defaultdict(list)
    todo: dict[str, set[int]] = {item.predictor.name: set() for item in loaded}
    for clip in clips:
        by_audio[clip.audio_id].append(clip.pk)
        for item in loaded:
            key = (clip.pk, item.predictor.name, item.model_id)
            if have[key] < len(item.predictor.columns):
                todo[item.predictor.name].add(clip.audio_id)
    wanted = set().union(*todo.values())
    audio = list(AudioFile.objects.filter(pk__in=wanted).order_by("sample_rate", "pk"))
    scored = sum(len(by_audio[a.pk]) for a in audio)
    if log:
        for item in loaded:
            log(f"{item.model_id} on {item.device}: {len(todo[item.predictor.name])} sounds")
    batch = max(1, int(getattr(settings, "FOLEY_EMBED_BATCH", 32)))
    done = 0
    for rate in sorted({a.sample_rate for a in audio}):
        group = [a for a in audio if a.sample_rate == rate]
        for start in range(0, len(group), batch):
            chunk = group[start : start + batch]
            _store(chunk, [_read(a) for a in chunk], rate, loaded, todo, by_audio)
            done += len(chunk)
            if progress:
                progress(done, len(audio), f"scored {done} of {len(audio)} sounds")
    return {
        "predictors": [item.predictor.name for item in loaded],
        "clips": len(clips),
        "computed": scored,
        "cached": len(clips) - scored,
        "model_ids": {item.predictor.name: item.model_id for item in loaded},
        "device": ", ".join(sorted({item.device for item in loaded})),
    }


def _store(
    chunk: list[AudioFile],
    samples: list[np.ndarray],
    rate: int,
    loaded: Sequence[Loaded],
    todo: dict[str, set[int]],
    by_audio: dict[int, list[int]],
) -> None:
    now = timezone.now()
    rows = []
    for item in loaded:
        name = item.predictor.name
        mine = [i for i, a in enumerate(chunk) if a.pk in todo[name]]
        if not mine:
            continue
        labels = [f"sound {chunk[i].sha256[:12]}" for i in mine]
        values = _rated(item, [samples[i] for i in mine], rate, labels)
        for i, value in zip(mine, values, strict=True):
            for clip_id in by_audio[chunk[i].pk]:
                rows += [
                    PredictorScore(
                        clip_id=clip_id,
                        predictor=name,
                        axis=axis,
                        value=float(value[axis]),
                        model_id=item.model_id,
                        computed_at=now,
                    )
                    for axis in item.predictor.columns
                ]
    PredictorScore.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["clip", "predictor", "axis"],
        update_fields=["value", "model_id", "computed_at"],
    )


# --- the summary (a selector) -------------------------------------------------------------------


def mean_interval(
    values: Sequence[float], level: float = 0.95
) -> tuple[float, float | None, float | None]:
    """The mean of `values` and its Student's t interval, mean ± t · s / √n, with t the
    (1 + level) / 2 quantile of Student's t with n - 1 degrees of freedom and s the standard
    deviation with n - 1 in its denominator: clips are taken as a sample of what the system
    makes. No interval (None, None) below 2 values."""
    from scipy import stats

    x = np.asarray(values, dtype=np.float64)
    mean = float(x.mean())
    if len(x) < 2:
        return mean, None, None
    half = float(stats.t.ppf((1 + level) / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return mean, mean - half, mean + half


def predictor_summary(challenge: Challenge) -> list[dict[str, Any]]:
    """Per system, category, predictor and axis: the number of clips, their mean and its 95%
    Student's t interval over the clips (`mean_interval`; `low` and `high` None below 2 clips),
    the files that gave the values, and `mean_25`, `mean_50`, `mean_100` where the system has
    more clips than that (`subset_means`: the league's stability). Only the system clips the
    objective stage reads count;
    where a predictor's rows come from several files (a run with new files under way), those of
    the files that computed last. Ordered by track, system, category and column."""
    clips = Clip.objects.filter(SETTLED, challenge=challenge, role=Clip.Role.SYSTEM)
    rows = list(
        PredictorScore.objects.filter(clip__in=clips).order_by("clip_id").values_list(
            "clip__system_id", "clip__category_id", "predictor", "axis", "value", "model_id",
            "computed_at",
        )
    )  # fmt: skip
    latest: dict[str, tuple[str, Any]] = {}
    for _system, _category, predictor, _axis, _value, model_id, computed_at in rows:
        if predictor not in latest or computed_at > latest[predictor][1]:
            latest[predictor] = (model_id, computed_at)
    groups: dict[tuple[int, int, str, str], list[float]] = defaultdict(list)
    for system, category, predictor, axis, value, model_id, _ in rows:
        if model_id == latest[predictor][0]:
            groups[(system, category, predictor, axis)].append(value)
    systems = {s.pk: s for s in challenge.systems.select_related("track")}
    categories = {c.pk: c for c in challenge.categories.all()}
    place = {key: i for i, key in enumerate(
        (p.name, axis) for p in PREDICTORS.values() for axis in p.columns
    )}  # fmt: skip

    def order(key: tuple[int, int, str, str]) -> tuple:
        system, category = systems[key[0]], categories[key[1]]
        column = place.get((key[2], key[3]), len(place))
        return (system.track.code, system.name, category.position, category.slug, column, key)

    out = []
    for key in sorted(groups, key=order):
        system_id, category_id, predictor, axis = key
        system = systems[system_id]
        mean, low, high = mean_interval(groups[key])
        out.append({
            "track": system.track.code, "system_id": system_id, "system": system.name,
            "category": categories[category_id].slug, "predictor": predictor, "axis": axis,
            "model_id": latest[predictor][0], "clips": len(groups[key]),
            "mean": mean, "low": low, "high": high,
            **subset_means(groups[key], (system_id, category_id)),
        })  # fmt: skip
    return out


# The clip counts the league's stability is measured at (scoring/league.py's SUBSET_SIZES, as
# the FAD results' draws in distances.py): DCASE 2023 Task 7 had 100 clips per system and category.
SUBSET_SIZES = (25, 50, 100)


def subset_means(values: Sequence[float], seed: Sequence[int]) -> dict[str, float]:
    """`mean_25`, `mean_50`, `mean_100`: the mean of one random draw of that many of the values
    (in the clips' order), for the sizes below their count only (at or above it the draw is every
    clip, the mean itself). The draw is seeded by the system and category, so every axis of a
    predictor draws the same clips and the same rows give the same means."""
    rng = np.random.default_rng(list(seed))
    x = np.asarray(values, dtype=np.float64)
    out = {}
    for size in SUBSET_SIZES:
        if size >= len(x):
            break
        out[f"mean_{size}"] = float(x[np.sort(rng.choice(len(x), size=size, replace=False))].mean())
    return out
