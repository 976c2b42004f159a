"""KAD between a reference A and a set B, each a folder of audio or a .npy of embeddings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from django.core.management.base import CommandError

from stimuli.objective.kad import KadReference, kad_interval

from .compute_fad import Command as FadCommand


class Command(FadCommand):
    help = (
        "Print the Kernel Audio Distance of B against the reference A as one JSON object (key "
        "`kad`): 100 x the unbiased MMD² with a Gaussian kernel whose bandwidth is A's median "
        "pairwise distance (kadtk's definition; may be slightly below 0 for two samples of one "
        "distribution). A and B are each a folder of audio files (embedded with --model) or a "
        ".npy of embeddings [n, d] or [clips, frames, d]; with 5 clips or more in B, `ci95` is "
        "a jackknife interval over B's clips, never below 0."
    )

    def add_arguments(self, parser):
        parser.add_argument("a", help="The reference.")
        parser.add_argument("b", help="The set measured against it.")
        parser.add_argument("--model", default="vggish", help="Embedding model for audio folders.")
        parser.add_argument(
            "--model-option", action="append", default=[], metavar="KEY=VALUE",
            help="An option of the model.",
        )  # fmt: skip
        parser.add_argument("--weights", default="", help="Weights file of the model.")
        parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if any).")
        parser.add_argument("--batch-size", type=int, default=32)

    def handle(self, *args, **options):
        self._model = None
        self._declared = None
        self.options = options
        a_clips, a_info = self._clips(Path(options["a"]))
        b_clips, b_info = self._clips(Path(options["b"]))
        try:
            reference = KadReference.of(a_clips)
            found = kad_interval(b_clips, reference)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        out = {"kad": found.value, "bandwidth": reference.bandwidth, "a": a_info, "b": b_info}
        if found.low is not None:
            out["ci95"] = [found.low, found.high]
        else:
            out["ci_withheld"] = found.withheld
        if self._model is not None:
            out["model_id"] = self._model.model_id
        self.stdout.write(json.dumps(out))

    def _clips(self, path: Path) -> tuple[list[np.ndarray], dict]:
        if not path.exists():
            raise CommandError(f"{path} does not exist")
        if path.is_dir():
            clips = self._embed_folder(path)
        elif path.suffix == ".npy":
            try:
                array = np.load(path, allow_pickle=False)
            except ValueError as exc:
                raise CommandError(f"{path.name}: {exc}") from None
            if array.ndim not in (2, 3) or not np.issubdtype(array.dtype, np.number):
                raise CommandError(f"{path.name}: expected numbers [n, d] or [clips, frames, d]")
            clips = list(array) if array.ndim == 3 else [row[None, :] for row in array]
        else:
            raise CommandError(f"{path}: expected a folder of audio or a .npy of embeddings")
        return clips, {"clips": len(clips), "embeddings": int(sum(len(c) for c in clips))}
