"""The sandbox's limits as this site's settings set them (the sandbox itself reads no settings)."""

from __future__ import annotations

from django.conf import settings

from sandbox.process import Limits
from sandbox.source import ArchiveLimits


def sandbox_limits() -> Limits:
    """Time, memory, processes and files of one generator's sandbox (FOLEY_SANDBOX_LIMITS)."""
    return Limits(**getattr(settings, "FOLEY_SANDBOX_LIMITS", {}))


def archive_limits() -> ArchiveLimits:
    """What a submitted generator archive may hold."""
    return ArchiveLimits(
        max_files=settings.FOLEY_GENERATOR_MAX_FILES,
        max_expanded_bytes=settings.FOLEY_GENERATOR_MAX_EXPANDED_BYTES,
        max_ratio=settings.FOLEY_GENERATOR_MAX_RATIO,
    )
