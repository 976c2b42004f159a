"""Listening, verified on the server: what was delivered of each sound and when, and what the
page reported as played.

The rater's browser is not trusted. A sound counts as heard only when

- the byte ranges served cover the whole file (a `Range: bytes=0-0` fetch is not a listen),
- at least `listened_fraction` of its duration has passed since it was first delivered, and
- the stretches of media time the page reported as played cover that share of the sound. Each
  stretch is cut to the wall time the server saw pass between the events that bound it, so a
  seek to the end, or a page that reports a minute of playing a second after it began, adds
  only what could really have been played.

Plain functions over the rows that carry `Heard`'s fields (trials, familiarization examples and
diversity trials); the clock is `now`, which tests replace instead of sleeping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from . import lookups
from .errors import ListeningError
from .models import Heard, ListeningTest

EVENTS = ("play", "pause", "seeking", "timeupdate", "ended")
# Network jitter between two event posts: a stretch may exceed the wall time seen by this much.
SLACK_S = 0.25
# Media times a little past the end (rounding in browsers) are read as the end.
END_TOLERANCE_S = 0.5


def now() -> datetime:
    return timezone.now()


def merge(intervals: list[list[float]]) -> list[list[float]]:
    """Sorted, non-overlapping intervals; touching ones (b + 1 == c for bytes) are joined by the
    caller's choice of closed or half-open ends."""
    result: list[list[float]] = []
    for start, end in sorted(intervals):
        if result and start <= result[-1][1]:
            result[-1][1] = max(result[-1][1], end)
        else:
            result.append([start, end])
    return result


def covered(intervals: list[list[float]]) -> float:
    return sum(end - start for start, end in intervals)


# --- Delivery ------------------------------------------------------------------------------------


def _delivery_fields(row: Heard, start: int, end: int, size: int, moment: datetime) -> dict:
    """What serving bytes start..end (inclusive) of a file of `size` bytes changes on `row`."""
    # Byte ranges are stored half-open, so adjacent pieces merge into one.
    ranges = merge([*row.delivered_ranges, [start, end + 1]])
    fields = {"delivered_ranges": ranges}
    if row.served_at is None:
        fields["served_at"] = moment
    if row.delivered_at is None and ranges[0][0] <= 0 and ranges[0][1] >= size:
        fields["delivered_at"] = moment
    return fields


def record_delivery(model: type[Heard], row: Heard, start: int, end: int, size: int) -> None:
    """Note that bytes start..end (inclusive) of a file of `size` bytes were served; `row` as
    read by the request. One statement when nothing changed the row since it was read (it
    writes only if the ranges are still those read); otherwise under the row's lock."""
    moment = now()
    fields = _delivery_fields(row, start, end, size, moment)
    read = {"delivered_ranges": row.delivered_ranges}
    if lookups.update_if_unchanged(model, row.pk, read, fields):
        return
    with transaction.atomic():
        current = model.objects.select_for_update(no_key=True).get(pk=row.pk)
        model.objects.filter(pk=row.pk).update(
            **_delivery_fields(current, start, end, size, moment)
        )


def recorded(row: Heard, start: int, end: int, size: int) -> bool:
    """Whether bytes start..end were already recorded as delivered on `row` as read (ranges
    only grow, so what was covered stays covered)."""
    ranges = row.delivered_ranges
    return row.served_at is not None and merge([*ranges, [start, end + 1]]) == ranges


# --- Events from the page ------------------------------------------------------------------------


def _media_time(value, duration: float, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ListeningError(f"{what} must be a media time in seconds.") from None
    if not math.isfinite(number) or number < 0 or number > duration + END_TOLERANCE_S:
        raise ListeningError(f"{what} must be a media time from 0 to {duration:.2f} s.")
    return min(number, duration)


def _close_stretch(row: Heard, at: float, moment: datetime) -> None:
    """End the stretch being played at media time `at`, no longer than the wall time seen."""
    if row.playing_from is None or row.playing_since is None:
        return
    elapsed = (moment - row.playing_since).total_seconds() + SLACK_S
    end = min(at, row.playing_from + max(0.0, elapsed))
    if end > row.playing_from:
        row.heard = merge([*row.heard, [row.playing_from, end]])
    row.playing_from = None
    row.playing_since = None


# What an event of the page's player changes on a row.
EVENT_FIELDS = ("plays", "seeks", "heard", "playing_from", "playing_since")


def _apply_event(
    row: Heard, kind: str, t: float, left: float | None, duration: float, moment: datetime
) -> None:
    if kind == "play":
        was_playing = row.playing_from is not None
        _close_stretch(row, t, moment)
        row.plays += not was_playing
        row.playing_from, row.playing_since = t, moment
    elif kind == "timeupdate":
        # A checkpoint while playing: what was played so far is kept if the page goes away.
        if row.playing_from is not None:
            _close_stretch(row, t, moment)
            row.playing_from, row.playing_since = t, moment
    elif kind == "seeking":
        playing = row.playing_from is not None
        _close_stretch(row, row.playing_from if left is None else left, moment)
        # Play again after the end restarts at 0: that is listening again, not a seek.
        if not (left is not None and left >= duration - 0.05 and t <= 0.05):
            row.seeks += 1
        if playing:
            row.playing_from, row.playing_since = t, moment
    else:  # pause, ended
        _close_stretch(row, duration if kind == "ended" else t, moment)


def record_event(
    model: type[Heard], row: Heard, kind: str, t, duration: float, *, seek_from=None
) -> Heard:
    """Apply one event of the page's player to `row` (as read by the request): `t` is the media
    time it reports (for `seeking`, the position sought; `seek_from` the position left). One
    statement when the row is still as read (a page sends its events one at a time); otherwise
    applied again under the row's lock to the row as it is."""
    if kind not in EVENTS:
        raise ListeningError(f"Unknown player event {kind!r}; use one of {', '.join(EVENTS)}.")
    t = _media_time(t, duration, "The media time")
    left = None if seek_from is None else _media_time(seek_from, duration, "The seek origin")
    moment = now()
    read = {name: getattr(row, name) for name in EVENT_FIELDS}
    _apply_event(row, kind, t, left, duration, moment)
    changed = {name: getattr(row, name) for name in EVENT_FIELDS}
    if lookups.update_if_unchanged(model, row.pk, read, changed):
        return row
    with transaction.atomic():
        row = model.objects.select_for_update(no_key=True).get(pk=row.pk)
        _apply_event(row, kind, t, left, duration, moment)
        row.save(update_fields=list(EVENT_FIELDS))
    return row


def stop(model: type[Heard], pk: int) -> None:
    """Another sound began: this one's stretch ends now (up to the wall time it may have had).
    A rater hears one sound at a time, so sounds played side by side do not each count."""
    with transaction.atomic():
        row = model.objects.select_for_update(no_key=True).get(pk=pk)
        if row.playing_from is None or row.playing_since is None:
            return
        moment = now()
        elapsed = (moment - row.playing_since).total_seconds()
        _close_stretch(row, row.playing_from + max(0.0, elapsed), moment)
        row.save(update_fields=["heard", "playing_from", "playing_since"])


def page_shown(model: type[Heard], tokens: list[str]) -> None:
    """A page (re)loaded: whatever played before stops, and only what was reported counts."""
    model.objects.filter(token__in=tokens, playing_from__isnull=False).update(
        playing_from=None, playing_since=None
    )


# --- The verdict ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listened:
    """How much of a sound the server can vouch was heard, and why it is not enough if not."""

    heard_s: float
    duration_s: float
    plays: int
    seeks: int
    reason: str  # empty: heard

    @property
    def ok(self) -> bool:
        return not self.reason

    @property
    def fraction(self) -> float:
        return min(1.0, self.heard_s / self.duration_s) if self.duration_s > 0 else 1.0

    def as_dict(self) -> dict:
        return {
            "heard": self.ok,
            "heard_fraction": round(self.fraction, 3),
            "plays": self.plays,
            "seeks": self.seeks,
            "reason": self.reason,
        }


def listened(row: Heard, duration: float, test: ListeningTest, *, what: str = "sound") -> Listened:
    """The server's verdict on one sound (a stretch still playing counts up to now)."""
    moment = now()
    stretches = list(row.heard)
    if row.playing_from is not None and row.playing_since is not None:
        elapsed = (moment - row.playing_since).total_seconds()
        end = min(duration, row.playing_from + max(0.0, elapsed))
        if end > row.playing_from:
            stretches = merge([*stretches, [row.playing_from, end]])
    heard_s = min(duration, covered(stretches))
    need = test.listened_fraction * duration
    reason = ""
    if row.served_at is None:
        reason = f"Please listen to the {what} before rating it."
    elif row.delivered_at is None:
        got = int(covered(row.delivered_ranges))
        reason = (
            f"Only part of the {what} reached your browser ({got} bytes); please play it to "
            "the end."
        )
    elif heard_s < need - 1e-6:
        reason = (
            f"You have heard {heard_s:.1f} s of the {duration:.1f} s {what} "
            f"({round(100 * heard_s / duration)}%); please listen to all of it. Skipping ahead "
            "does not count as listening."
        )
    elif (waited := (moment - row.served_at).total_seconds()) < need:
        reason = (
            f"The {what} lasts {duration:.1f} s and reached your browser {waited:.1f} s ago; "
            "please listen to all of it."
        )
    return Listened(heard_s, duration, row.plays, row.seeks, reason)
