"""Published reference statistics (e.g. DCASE 2023 Task 7's evaluation-set VGGish statistics):
imported, checked against the model they were computed with, and used where no audio is held."""

from __future__ import annotations

from django.db import transaction

from ..models import Challenge, FadResult, ReferenceStats
from .config import EMBEDDING_SIZES, STATS_PRESETS, UNDECLARED, ObjectiveError
from .embeddings.base import split_model_id
from .fad import MAX_STATS_DIM, GaussianStats


def declared_model(value: str) -> str:
    """The model id that imported statistics declare: a preset name or a full model id."""
    value = value.strip()
    if value in STATS_PRESETS:
        return STATS_PRESETS[value]
    try:
        _, options, _ = split_model_id(value)
    except ValueError:
        presets = ", ".join(f"{k} ({v})" for k, v in STATS_PRESETS.items())
        raise ObjectiveError(
            f"model {value!r}: name the model the statistics were made with as a model id, "
            "name:options@weights as FAD results show it (weights * for any weights file), "
            f"or one of {presets}"
        ) from None
    if options == UNDECLARED or len(value) > ReferenceStats._meta.get_field("model_id").max_length:
        raise ObjectiveError(f"model {value!r} is not a model id statistics can declare")
    return value


def import_reference_stats(
    challenge: Challenge,
    files: dict[str, object],
    *,
    model: str = "vggish",
    reference: str = FadResult.Reference.EVALUATION,
    source: str = "",
) -> list[ReferenceStats]:
    """Store published statistics per category, all or nothing.

    `files` maps a category (slug or name, any case, as for uploads) to an `.npz` path or file
    holding `mu` and `sigma` (and optionally `embedding_count`). `model` is the model they
    were made with: a model id (`name:options@weights`, weights `*` for any file) or a preset
    (`vggish`: DCASE 2023 Task 7's configuration). A FAD job refuses statistics of another
    configuration of its model. Every file is checked (shapes, finite, symmetric, the model's
    embedding size where known) before anything is stored.
    """
    import hashlib

    from ..selectors import category_lookup, normalise_folder

    if reference not in FadResult.Reference.values:
        raise ObjectiveError(f"reference must be one of {', '.join(FadResult.Reference.values)}")
    model_id = declared_model(model)
    name = split_model_id(model_id)[0]
    size = EMBEDDING_SIZES.get(name)
    lookup = category_lookup(challenge)
    parsed = []
    errors = []
    for label, source_file in sorted(files.items()):
        category = lookup.get(normalise_folder(label))
        if category is None:
            errors.append(f"{label}: no category of this challenge matches")
            continue
        try:
            stats = GaussianStats.from_npz(source_file, max_dim=size or MAX_STATS_DIM)
        except ValueError as exc:
            errors.append(f"{label}: {exc}")
            continue
        if size is not None and stats.dim != size:
            errors.append(f"{label}: {stats.dim}-d statistics, but {name} embeddings are {size}-d")
            continue
        parsed.append((category, stats))
    dims = {s.dim for _, s in parsed}
    if len(dims) > 1:
        errors.append(f"the statistics disagree on the embedding size: {sorted(dims)}")
    if errors:
        raise ObjectiveError("; ".join(errors))
    rows = []
    with transaction.atomic():
        for category, stats in parsed:
            data = stats.to_npz_bytes()
            row, _ = ReferenceStats.objects.update_or_create(
                category=category,
                reference=reference,
                model=name,
                defaults={
                    "challenge": challenge,
                    "model_id": model_id,
                    "dim": stats.dim,
                    "count": stats.count,
                    "data": data,
                    "source": source[:255],
                    "sha256": hashlib.sha256(data).hexdigest(),
                },
            )
            rows.append(row)
    return rows
