"""FAD between two sets, each a folder of audio, a .npy of embeddings or an .npz of statistics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from django.core.management.base import BaseCommand, CommandError

from stimuli.objective import config, reference_stats
from stimuli.objective.embeddings.base import model_id_matches, split_model_id
from stimuli.objective.fad import (
    GaussianStats,
    fad_bootstrap_interval,
    fad_infinity,
    frechet_distance,
)

AUDIO_SUFFIXES = {".wav", ".flac", ".ogg", ".aiff", ".aif"}


def _parse_options(pairs: list[str]) -> dict:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise CommandError(f"--model-option wants KEY=VALUE, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


class Command(BaseCommand):
    help = (
        "Print the Fréchet Audio Distance between A and B as one JSON object (key `fad`). "
        "A and B are each a folder of audio files (embedded with --model), a .npy matrix of "
        "embeddings [n, d] (or [clips, frames, d]), or an .npz with `mu` and `sigma`. Audio "
        "compared with statistics is embedded as the statistics declare (--stats-model; by "
        "default DCASE 2023 Task 7's VGGish preset) or refused."
    )

    def add_arguments(self, parser):
        parser.add_argument("a")
        parser.add_argument("b")
        parser.add_argument("--model", default="vggish", help="Embedding model for audio folders.")
        parser.add_argument(
            "--model-option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="An option of the model. Audio compared with statistics takes the options the "
            "statistics declare (--stats-model) when none are given.",
        )
        parser.add_argument(
            "--stats-model",
            default="vggish",
            help="The model an .npz of statistics was made with: a model id name:options@weights "
            "as this command prints it (weights * for any weights file), or vggish for the DCASE "
            f"2023 Task 7 statistics ({config.DCASE2023_VGGISH}, the default: VGGish with "
            'options {"preset": "dcase2023"}). Audio embedded with another configuration '
            "is refused before anything is embedded: its FAD would not be comparable.",
        )
        parser.add_argument("--weights", default="", help="Weights file of the model.")
        parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if any).")
        parser.add_argument("--batch-size", type=int, default=32)
        parser.add_argument(
            "--inf",
            action="store_true",
            help="Also FAD-inf of A's embeddings (Chong & Forsyth's extrapolation, as in fadtk; "
            "needs more than 2 x d embeddings, at least 100).",
        )
        parser.add_argument(
            "--bootstrap",
            type=int,
            default=0,
            metavar="N",
            help="95%% bootstrap interval over A's clips, N resamples (basic, cut at 0).",
        )
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, **options):
        self._model = None
        self.options = options
        # Statistics on either side fix the configuration audio must be embedded with.
        self._declared = None
        if any(Path(options[side]).suffix == ".npz" for side in ("a", "b")):
            try:
                self._declared = reference_stats.declared_model(options["stats_model"])
            except config.ObjectiveError as exc:
                raise CommandError(f"--stats-model: {exc}") from None
        a_stats, a_clips, a_info = self._load(Path(options["a"]))
        b_stats, _, b_info = self._load(Path(options["b"]))
        if a_stats.dim != b_stats.dim:
            raise CommandError(f"embedding sizes differ: A has {a_stats.dim}, B has {b_stats.dim}")
        out = {"fad": frechet_distance(a_stats, b_stats), "a": a_info, "b": b_info}
        if self._model is not None:
            out["model_id"] = self._model.model_id
        if options["inf"] or options["bootstrap"]:
            if a_clips is None:
                raise CommandError("--inf and --bootstrap need embeddings or audio for A")
            try:
                if options["inf"]:
                    result = fad_infinity(a_clips, b_stats, seed=options["seed"])
                    out["fad_inf"] = result.value
                    out["fad_inf_r2"] = result.r_squared
                if options["bootstrap"]:
                    low, high = fad_bootstrap_interval(
                        a_clips, b_stats, n_resamples=options["bootstrap"], seed=options["seed"]
                    )
                    out["ci95"] = [low, high]
            except ValueError as exc:
                raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(out))

    def _load(self, path: Path):
        if not path.exists():
            raise CommandError(f"{path} does not exist")
        try:
            if path.is_dir():
                clips = self._embed_folder(path)
                stats = GaussianStats.from_embeddings(clips)
                return stats, clips, {"clips": len(clips), "embeddings": stats.count}
            if path.suffix == ".npz":
                stats = GaussianStats.from_npz(path)
                info = {"statistics": path.name, "embeddings": stats.count}
                return stats, None, {**info, "model_id": self._declared}
            if path.suffix == ".npy":
                array = np.load(path, allow_pickle=False)
                if array.ndim not in (2, 3):
                    raise CommandError(f"{path.name}: expected [n, d] or [clips, frames, d]")
                clips = list(array) if array.ndim == 3 else [row[None, :] for row in array]
                stats = GaussianStats.from_embeddings(clips)
                return stats, clips, {"embeddings": stats.count}
        except ValueError as exc:
            raise CommandError(f"{path.name}: {exc}") from None
        raise CommandError(f"{path}: expected a folder of audio, a .npy or an .npz")

    def _embed_folder(self, folder: Path) -> list[np.ndarray]:
        import soundfile as sf

        from stimuli.objective.embeddings import WeightsMissing, load_embedding_model

        files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in AUDIO_SUFFIXES)
        if len(files) < 2:
            raise CommandError(f"{folder}: fewer than 2 audio files")
        if self._model is None:
            name, options = self.options["model"], _parse_options(self.options["model_option"])
            declared = self._declared
            if declared and not options and split_model_id(declared)[0] == name:
                options = dict(config.DECLARED_OPTIONS.get(declared, {}))
            try:
                self._model = load_embedding_model(
                    name, options, self.options["weights"], device=self.options["device"]
                )
            except (ValueError, WeightsMissing) as exc:
                raise CommandError(str(exc)) from None
            if declared and not model_id_matches(declared, self._model.model_id):
                hint = (
                    " (--model vggish, no --model-option or preset=dcase2023)"
                    if declared == config.DCASE2023_VGGISH
                    else ""
                )
                raise CommandError(
                    f"the statistics were made with {declared}, but --model embeds with "
                    f"{self._model.model_id}: the FAD would not be comparable with theirs. "
                    f"Embed with their configuration{hint}, or name the statistics' own "
                    "model with --stats-model."
                )
        groups: dict[tuple[int, int], list[tuple[int, np.ndarray]]] = {}
        for index, path in enumerate(files):
            try:
                audio, rate = sf.read(path, dtype="float32", always_2d=True)
            except Exception as exc:  # soundfile raises its own error types
                raise CommandError(f"{path.name}: not readable audio ({exc})") from None
            mono = audio.mean(axis=1)
            groups.setdefault((rate, mono.shape[0]), []).append((index, mono))
        out: list[np.ndarray | None] = [None] * len(files)
        size = self.options["batch_size"]
        for (rate, _), members in groups.items():
            for start in range(0, len(members), size):
                batch = members[start : start + size]
                emb = self._model.embed(np.stack([m for _, m in batch]), rate)
                for (index, _), frames in zip(batch, emb, strict=True):
                    out[index] = frames
        return out  # type: ignore[return-value]
