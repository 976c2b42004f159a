"""The platform's procedural baseline as a team would submit it: a zip holding the generator
package (the baseline's module and the contract helpers it imports) and a weights file.

`python -m stimuli.submissions.baseline_archive out.zip` writes it, for teams to try the
submission path, for the demo's teams and for the tests and benchmark.
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

PACKAGE = "foley_baseline"
GENERATORS = Path(__file__).resolve().parent.parent / "generators"


def baseline_archive(
    *, weights: bytes = b"\x93NUMPY baseline weights v1", code_suffix: str = ""
) -> bytes:
    """The archive's bytes. `weights` is the weights file's content (the baseline reads none:
    it stands for a trained model's); `code_suffix` is appended to the module (a code fix)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(
            f"{PACKAGE}/__init__.py", (GENERATORS / "baseline.py").read_text() + code_suffix
        )
        zf.writestr(f"{PACKAGE}/contract.py", (GENERATORS / "contract.py").read_text())
        zf.writestr(f"{PACKAGE}/weights.npy", weights)
    return buffer.getvalue()


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "baseline-submission.zip")
    target.write_bytes(baseline_archive())
    print(f"wrote {target}")
