"""CLAP scores: how close a generated clip is to the prompt it was made from (their cosine in
LAION-CLAP's joint space), for the text-prompt study beside the judges' answers.

The web process asks for scores (`request_scores`: one `PromptScore` row per clip and prompt,
its cosine empty, and a job naming the rows); a GPU worker (`run_scores`, `compute_scores`) loads
the configured checkpoint and tokenizer and fills them. Nothing here imports torch at module level: the web
process checks only that the files exist (`clap_setup`), and says which file would enable the
score where one is missing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from stimuli.job_kinds import CLAP_SCORES

from ..jobs import JobProgress, create_job, enqueue, run_job
from ..models import AudioFile, Challenge, Job, PromptScore
from .embeddings.base import file_digest

CHECKPOINT_SOURCE = "Hugging Face, lukewys/laion_clap"
TOKENIZER_SOURCE = "Hugging Face, FacebookAI/roberta-base"
CHECKPOINT_FILES = {
    "htsat-tiny": "630k-audioset-best.pt",
    "htsat-base": "music_audioset_epoch_15_esc_90.14.pt",
}
TOKENIZER_FILES = ("vocab.json", "merges.txt")


@dataclass(frozen=True)
class ClapSetup:
    """Where the CLAP score's files are expected, and which of them are missing."""

    checkpoint: Path
    tokenizer: Path
    variant: str
    missing: tuple[str, ...]

    @property
    def enabled(self) -> bool:
        return not self.missing

    @property
    def needs_files(self) -> str:
        """What would enable the score, the files by name only: for published results, which
        must not show where the server keeps its files ('' when it is enabled)."""
        if not self.missing:
            return ""
        checkpoint, tokenizer = self.checkpoint.name, "RoBERTa-base's vocab.json and merges.txt"
        return (
            f"Not computed: the CLAP score needs the LAION-CLAP checkpoint {checkpoint} "
            f"({CHECKPOINT_SOURCE}) and {tokenizer} ({TOKENIZER_SOURCE}) on the workers."
        )

    @property
    def needs(self) -> str:
        """In words, what would enable the score ('' when it is enabled)."""
        if not self.missing:
            return ""
        return (
            f"The CLAP score needs {' and '.join(self.missing)}. Set FOLEY_CLAP_CHECKPOINT and "
            "FOLEY_CLAP_TOKENIZER to name other places."
        )


def clap_setup() -> ClapSetup:
    variant = settings.FOLEY_CLAP_VARIANT
    if variant not in CHECKPOINT_FILES:
        raise ValueError(
            f"FOLEY_CLAP_VARIANT {variant!r}: the variants are {', '.join(CHECKPOINT_FILES)}"
        )
    model_dir = Path(settings.FOLEY_MODEL_DIR)
    checkpoint = Path(settings.FOLEY_CLAP_CHECKPOINT or model_dir / CHECKPOINT_FILES[variant])
    tokenizer = Path(settings.FOLEY_CLAP_TOKENIZER or model_dir / "roberta-base")
    missing = []
    if not checkpoint.is_file():
        missing.append(
            f"the LAION-CLAP checkpoint {checkpoint} ({checkpoint.name} as published on "
            f"{CHECKPOINT_SOURCE}; a {variant} checkpoint without fusion)"
        )
    absent = [name for name in TOKENIZER_FILES if not (tokenizer / name).is_file()]
    if absent:
        missing.append(
            f"RoBERTa-base's tokenizer {' and '.join(absent)} in {tokenizer} "
            f"(as published on {TOKENIZER_SOURCE})"
        )
    return ClapSetup(checkpoint, tokenizer, variant, tuple(missing))


def prompt_sha256(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def request_scores(challenge: Challenge, pairs: Iterable[tuple[int, str]]) -> Job | None:
    """Ask for the CLAP score of each (audio id, prompt) that has none: the rows, and one job
    naming them, queued once they are committed (None when every pair has its score)."""
    wanted = {(audio_id, prompt_sha256(prompt)): prompt for audio_id, prompt in pairs}
    if not wanted:
        return None
    with transaction.atomic():
        PromptScore.objects.bulk_create(
            [PromptScore(audio_id=a, prompt=p, prompt_sha256=s) for (a, s), p in wanted.items()],
            ignore_conflicts=True,
        )
        todo = [
            pk
            for pk, a, s in PromptScore.objects.filter(
                audio_id__in={a for a, _ in wanted}, cosine__isnull=True
            ).values_list("pk", "audio_id", "prompt_sha256")
            if (a, s) in wanted
        ]
        if not todo:
            return None
        job = create_job(CLAP_SCORES, challenge=challenge, params={"score_ids": todo})
        enqueue(job)
    return job


def run_scores(job_id: int) -> Job:
    """The worker's side of a scores job."""

    def work(job: Job, progress: JobProgress) -> dict:
        ids = job.params["score_ids"]
        progress(0, len(ids), "loading the CLAP model")
        computed = compute_scores(ids, progress)
        return {"computed": computed, "asked": len(ids)}

    return run_job(job_id, work)


def stored_scores(pairs: Iterable[tuple[int, str]]) -> tuple[dict[tuple[int, str], float], str]:
    """The computed cosines of these (audio id, prompt) pairs, and the model that gave them.

    Where scores of several models exist (the checkpoint was changed), those of the model that
    computed last are taken, so a system is never compared on another model's scale.
    """
    wanted = {(a, prompt_sha256(p)): (a, p) for a, p in pairs}
    rows = PromptScore.objects.filter(
        audio_id__in={a for a, _ in wanted}, cosine__isnull=False
    ).values_list("audio_id", "prompt_sha256", "model_id", "cosine", "computed_at")
    rows = [r for r in rows if (r[0], r[1]) in wanted]
    if not rows:
        return {}, ""
    model_id = max(rows, key=lambda r: r[4])[2]
    return {wanted[(a, s)]: c for a, s, m, c, _ in rows if m == model_id}, model_id


def compute_scores(score_ids: Sequence[int], progress: JobProgress | None = None) -> int:
    """Worker side: fill the cosine of these rows with the configured CLAP model (idempotent:
    rows already computed by the same model are left); returns how many were computed."""
    setup = clap_setup()
    if not setup.enabled:
        raise FileNotFoundError(setup.needs)
    model_id = (
        f"clap-score:{setup.variant}@{file_digest(setup.checkpoint)}"
        f"+{file_digest(setup.tokenizer / 'vocab.json', 8)}"
        f"{file_digest(setup.tokenizer / 'merges.txt', 8)}"
    )
    rows = [
        row
        for row in PromptScore.objects.filter(pk__in=list(score_ids)).select_related("audio")
        if row.cosine is None or row.model_id != model_id
    ]
    if not rows:
        return 0
    from .embeddings.clap_text import ClapScorer

    scorer = ClapScorer(setup.checkpoint, setup.tokenizer, setup.variant)
    done = 0
    for group in _by_shape(rows).values():
        for start in range(0, len(group), settings.FOLEY_EMBED_BATCH):
            batch = group[start : start + settings.FOLEY_EMBED_BATCH]
            _score(scorer, batch, model_id)
            done += len(batch)
            if progress:
                progress(done, len(rows), f"scored {done} of {len(rows)} clips")
    return len(rows)


def _by_shape(rows: list[PromptScore]) -> dict[tuple[int, int], list[PromptScore]]:
    groups: dict[tuple[int, int], list[PromptScore]] = {}
    for row in rows:
        groups.setdefault((row.audio.sample_rate, row.audio.frames), []).append(row)
    return groups


def _score(scorer, rows: list[PromptScore], model_id: str) -> None:
    import numpy as np

    from .embeddings.clap_text import cosine
    from .embeddings.store import _read

    audio: list[AudioFile] = [row.audio for row in rows]
    audio_emb = scorer.audio_embeddings(np.stack([_read(a) for a in audio]), audio[0].sample_rate)
    text_emb = scorer.text_embeddings([row.prompt for row in rows])
    now = timezone.now()
    for row, value in zip(rows, cosine(audio_emb, text_emb.cpu()).tolist(), strict=True):
        row.cosine, row.model_id, row.computed_at = float(value), model_id, now
    PromptScore.objects.bulk_update(rows, ["cosine", "model_id", "computed_at"])
