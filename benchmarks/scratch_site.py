"""The platform in a throwaway folder for a benchmark: SQLite and media there, migrated."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def django_in_scratch() -> Path:
    """Point Django at a fresh folder (unless the environment says otherwise), set it up and
    migrate; returns the folder. Call before importing the platform's models."""
    scratch = Path(tempfile.mkdtemp(prefix="foley-bench-"))
    os.environ.setdefault("FOLEY_DATA_DIR", str(scratch))
    os.environ.setdefault("MEDIA_ROOT", str(scratch / "media"))
    os.environ.setdefault("SECRET_KEY", "benchmark-only-key-0123456789-abcdefghijklmnopqrstuvwxyz")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "foley_platform.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return scratch
