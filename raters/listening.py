"""Listening, verified on the server: what was sent of each sound and when, and what the page
reported as played.

The rater's browser is not trusted. A sound counts as heard only when

- the bytes sent cover the whole file, counted once they really left the server (a `HEAD`, a
  `Range: bytes=0-0` fetch or a download abandoned half-way is not a delivery),
- the page reported playing it, and
- the stretches of media time the page reported as played cover `listened_fraction` of the
  sound; since no stretch is credited more than the wall time it had (and one allowance for
  jitter), that share of its duration has passed since its first play.

A rater hears one sound at a time, and the rater's record says which (`Rater.playing_*`): a
play of another sound ends the stretch of the one playing. Each stretch is credited no more than
the wall time since its play began, with one allowance for network jitter per play (not per
event: checkpoints add nothing), and every play begins no earlier than the listening already
credited ends (`Rater.listened_until`), so each allowance is taken from the next play's time and
all of a rater's sounds together are never credited more than the time that passed and one
allowance. Seeking ahead, playing faster, flooding checkpoints or playing
sounds side by side adds nothing.

Plain functions over the rows that carry `Heard`'s fields (trials, familiarization examples,
diversity trials and the text-prompt study's clips) and the rater's fields; the clock is `now`,
which tests replace instead of sleeping. The pages reach them by the sound's token
(`serve_audio`, `player_event`, `listened_now`), which names no system, team or anchor.
"""

from __future__ import annotations

import json
import math
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.http import HttpResponse
from django.utils import timezone

from stimuli.models import AudioFile

from . import delivery, selectors, statements
from .errors import ListeningError
from .models import (
    DiversityTrial,
    FamiliarizationClip,
    Heard,
    ListeningTest,
    PromptClip,
    Rater,
    ScreeningTrial,
    TextTrial,
    Trial,
)

EVENTS = ("play", "pause", "seeking", "timeupdate", "ended")
# Network jitter between two event posts: a stretch may exceed the wall time seen by this much.
SLACK_S = 0.25
# Media times a little past the end (rounding in browsers) are read as the end.
END_TOLERANCE_S = 0.5


# When the request being answered reached the web server in front (`request_arrived`), if known.
ARRIVED: ContextVar[datetime | None] = ContextVar("listening_request_arrived", default=None)


def now() -> datetime:
    """The moment a listening request happened: when it reached the web server in front where
    that server says so (a request that waited in a busy server's queue still happened when the
    browser sent it; see `foley_platform.middleware.request_arrival`), else now."""
    return ARRIVED.get() or timezone.now()


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
    """What having sent bytes start..end (inclusive) of a file of `size` bytes changes on
    `row`."""
    # Byte ranges are stored half-open, so adjacent pieces merge into one.
    ranges = merge([*row.delivered_ranges, [start, end + 1]])
    fields = {"delivered_ranges": ranges}
    if row.served_at is None:
        fields["served_at"] = moment
    if row.delivered_at is None and ranges[0][0] <= 0 and ranges[0][1] >= size:
        fields["delivered_at"] = moment
    return fields


def record_delivery(model: type[Heard], row: Heard, start: int, end: int, size: int) -> None:
    """Note that bytes start..end (inclusive) of a file of `size` bytes were sent, once they
    were (`delivery.Sent`); `row` as read by the request. One statement when nothing changed
    the row since it was read (it writes only if the ranges are still those read); otherwise
    under the row's lock."""
    moment = now()
    fields = _delivery_fields(row, start, end, size, moment)
    read = {"delivered_ranges": row.delivered_ranges}
    if statements.update(model, row.pk, fields, read=read):
        return
    with transaction.atomic():
        current = model.objects.select_for_update(no_key=True).get(pk=row.pk)
        model.objects.filter(pk=row.pk).update(
            **_delivery_fields(current, start, end, size, moment)
        )


def recorded(row: Heard, start: int, end: int, size: int) -> bool:
    """Whether bytes start..end were already recorded as sent on `row` as read (ranges only
    grow, so what was covered stays covered)."""
    ranges = row.delivered_ranges
    return row.served_at is not None and merge([*ranges, [start, end + 1]]) == ranges


# --- Events from the page ------------------------------------------------------------------------

# The kinds of sound a rater hears, by `Rater.playing_kind`.
KINDS: tuple[type[Heard], ...] = (
    Trial,
    FamiliarizationClip,
    DiversityTrial,
    TextTrial,
    PromptClip,
    ScreeningTrial,
)
KIND_OF = {model: n for n, model in enumerate(KINDS)}
# What an event changes on a sound's row, and on the rater.
EVENT_FIELDS = ("plays", "seeks", "heard", "first_played_at")
RATER_FIELDS = (
    "playing_kind",
    "playing_id",
    "playing_from",
    "playing_since",
    "playing_credited",
    "listened_until",
)


def _media_time(value, duration: float, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ListeningError(f"{what} must be a media time in seconds.") from None
    if not math.isfinite(number) or number < 0 or number > duration + END_TOLERANCE_S:
        raise ListeningError(f"{what} must be a media time from 0 to {duration:.2f} s.")
    return min(number, duration)


def plays_this(rater: Rater, model: type[Heard], pk: int) -> bool:
    return rater.playing_id == pk and rater.playing_kind == KIND_OF[model]


def _credit_to(rater: Rater, at: float, moment: datetime, *, slack: bool) -> float:
    """How far (media time) the open stretch may be credited at `moment` when the page reports
    media time `at`: no further than the wall time since the play began, with one allowance for
    network jitter per play (`slack`), none for a verdict on a sound still playing; never less
    than what it was already credited."""
    elapsed = (moment - rater.playing_since).total_seconds() + (SLACK_S if slack else 0.0)
    end = min(at, rater.playing_from + max(0.0, elapsed))
    return max(end, rater.playing_credited or rater.playing_from)


def _credit(rater: Rater, row: Heard, at: float, moment: datetime, *, slack: bool) -> None:
    """Credit the open stretch of `rater` (playing `row`) up to media time `at`, and keep it
    open: a checkpoint keeps what was played if the page goes away."""
    end = _credit_to(rater, at, moment, slack=slack)
    if end > rater.playing_from:
        row.heard = merge([*row.heard, [rater.playing_from, end]])
    rater.playing_credited = end


def _close(rater: Rater, row: Heard | None, at: float, moment: datetime, *, slack: bool) -> None:
    """End the rater's open stretch (on `row`, the sound playing) at media time `at`. The wall
    time it was credited is used up: the next play, of any sound, starts after it."""
    if rater.playing_kind is None:
        return
    if row is not None:
        _credit(rater, row, at, moment, slack=slack)
    used = (rater.playing_credited or rater.playing_from) - rater.playing_from
    rater.listened_until = rater.playing_since + timedelta(seconds=used)
    rater.playing_kind = rater.playing_id = None
    rater.playing_from = rater.playing_since = rater.playing_credited = None


def _open(rater: Rater, model: type[Heard], row: Heard, t: float, moment: datetime) -> None:
    # A play begins no earlier than the listening already credited ends: two sounds played
    # at once, or one replayed in quick bursts, share one stretch of wall time.
    since = moment if rater.listened_until is None else max(moment, rater.listened_until)
    rater.playing_kind, rater.playing_id = KIND_OF[model], row.pk
    rater.playing_from, rater.playing_since, rater.playing_credited = t, since, t


def apply_event(
    rater: Rater,
    model: type[Heard],
    row: Heard,
    kind: str,
    t: float,
    left: float | None,
    duration: float,
    moment: datetime,
) -> None:
    """One event of the page's player for `row`, on the rater's and the row's fields as read.
    The caller has closed a stretch of another sound first (`close_other`)."""
    mine = plays_this(rater, model, row.pk)
    if kind == "play":
        if mine:  # a play while playing: the stretch so far ends where the page says it is
            _close(rater, row, t, moment, slack=True)
        else:
            row.plays += 1
        if row.first_played_at is None:
            row.first_played_at = moment
        _open(rater, model, row, t, moment)
    elif not mine:
        # An event of a sound that is not playing (paused, cut short by another sound, or
        # its page reloaded) changes nothing but a seek's count.
        if kind == "seeking" and not _restart(left, t, duration):
            row.seeks += 1
    elif kind == "timeupdate":
        _credit(rater, row, t, moment, slack=True)
    elif kind == "seeking":
        _close(rater, row, rater.playing_credited if left is None else left, moment, slack=True)
        if not _restart(left, t, duration):
            row.seeks += 1
        _open(rater, model, row, t, moment)
    else:  # pause, ended
        _close(rater, row, duration if kind == "ended" else t, moment, slack=True)


def _restart(left: float | None, t: float, duration: float) -> bool:
    """Play again after the end restarts at 0: that is listening again, not a seek."""
    return left is not None and left >= duration - 0.05 and t <= 0.05


def _other_playing(rater: Rater, model: type[Heard], pk: int) -> bool:
    return rater.playing_kind is not None and not plays_this(rater, model, pk)


def record_event(
    rater: Rater, model: type[Heard], row: Heard, kind: str, t, duration: float, *, seek_from=None
) -> Heard:
    """Apply one event of the page's player to `row` and to the rater (both as read by the
    request): `t` is the media time it reports (for `seeking`, the position sought;
    `seek_from` the position left).

    A rater's events apply one at a time: the write happens only if no other event of the rater
    came between the reading and the write (`listening_version`); otherwise, or when a play cuts
    short another sound, the event is applied again under the rater's lock, to everything as it
    is then."""
    if kind not in EVENTS:
        raise ListeningError(f"Unknown player event {kind!r}; use one of {', '.join(EVENTS)}.")
    t = _media_time(t, duration, "The media time")
    left = None if seek_from is None else _media_time(seek_from, duration, "The seek origin")
    moment = now()
    if not (kind == "play" and _other_playing(rater, model, row.pk)):
        version = rater.listening_version
        apply_event(rater, model, row, kind, t, left, duration, moment)
        if statements.write_event(rater, version, model, row, EVENT_FIELDS, RATER_FIELDS):
            rater.listening_version = version + 1
            return row
    with transaction.atomic():
        fresh = Rater.objects.select_for_update(no_key=True).get(pk=rater.pk)
        row = model.objects.select_for_update(no_key=True).get(pk=row.pk)
        if kind == "play" and _other_playing(fresh, model, row.pk):
            close_other(fresh, moment)
        apply_event(fresh, model, row, kind, t, left, duration, moment)
        row.save(update_fields=list(EVENT_FIELDS))
        fresh.listening_version += 1
        fresh.save(update_fields=[*RATER_FIELDS, "listening_version"])
    for name in (*RATER_FIELDS, "listening_version"):
        setattr(rater, name, getattr(fresh, name))
    return row


def close_other(rater: Rater, moment: datetime) -> None:
    """Another sound began: the one playing stops now, credited the wall time it had with the
    play's allowance for jitter (the next sound's play, which starts after what was credited,
    gives it back), no further than its end. Under the rater's lock.

    The allowance matters when one sound follows another at once: its play may reach the server
    before the end of the sound before it, which was itself stamped late by a busy network."""
    other_model = KINDS[rater.playing_kind]
    other = other_model.objects.select_for_update(no_key=True).get(pk=rater.playing_id)
    _close(rater, other, _duration(other), moment, slack=True)
    other.save(update_fields=["heard"])


def _duration(row: Heard) -> float:
    """A sound's duration, from the audio it was made from (delivery keeps the duration)."""
    audio = row.item.audio if isinstance(row, DiversityTrial) else row.audio
    return audio.duration_s


def page_shown(rater: Rater) -> None:
    """A rater's page (re)loaded: whatever played before stops, and only what was reported
    (credited) counts. Written only when something was playing."""
    if rater.playing_kind is None:
        return
    version = rater.listening_version
    _close(rater, None, 0.0, now(), slack=False)
    if statements.write_event(rater, version, None, None, (), RATER_FIELDS):
        rater.listening_version = version + 1
        return
    with transaction.atomic():
        fresh = Rater.objects.select_for_update(no_key=True).get(pk=rater.pk)
        _close(fresh, None, 0.0, now(), slack=False)
        fresh.listening_version += 1
        fresh.save(update_fields=[*RATER_FIELDS, "listening_version"])
    for name in (*RATER_FIELDS, "listening_version"):
        setattr(rater, name, getattr(fresh, name))


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


def listened(
    row: Heard,
    duration: float,
    test: ListeningTest,
    *,
    what: str = "sound",
    rater: Rater | None = None,
) -> Listened:
    """The server's verdict on one sound. A stretch still playing (by `rater`'s record) counts
    up to now, without the allowance for jitter."""
    moment = now()
    stretches = list(row.heard)
    if rater is not None and plays_this(rater, type(row), row.pk):
        end = min(duration, _credit_to(rater, duration, moment, slack=False))
        if end > rater.playing_from:
            stretches = merge([*stretches, [rater.playing_from, end]])
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
    elif need > 0 and row.first_played_at is None:
        reason = f"Please play the {what} before rating it."
    elif heard_s < need - 1e-6:
        reason = (
            f"You have heard {heard_s:.1f} s of the {duration:.1f} s {what} "
            f"({round(100 * heard_s / duration)}%); please listen to all of it. Only the "
            "time it really played counts: skipping ahead, playing faster or playing two "
            "sounds at once does not."
        )
    return Listened(heard_s, duration, row.plays, row.seeks, reason)


# --- Audio by token ------------------------------------------------------------------------------


def _other_sounds(rater: Rater) -> tuple[tuple[type, Q], ...]:
    """The kinds of sound a rater hears besides trials (`statements.trial_of` reads those), each
    with the filter to the rater's own, in the order a listening test asks for them."""
    return (
        (FamiliarizationClip, Q(session__rater=rater)),
        (DiversityTrial, Q(rater=rater)),
        # The text-prompt protocol's sounds: a generated clip once it is made.
        (TextTrial, Q(judge__rater=rater, audio__isnull=False)),
        (PromptClip, Q(prompt_set__judge__rater=rater)),
        # The screening's sounds, made for this rater at the test's loudness already.
        (ScreeningTrial, Q(attempt__rater=rater)),
    )


def _sound(
    rater: Rater, token: str, test: ListeningTest | None = None
) -> tuple[type, Heard, AudioFile]:
    """The row behind one of the rater's tokens and the audio its browser receives: one query
    for a trial, the most asked for."""
    test = test or selectors.listening_test(rater.challenge)
    # Read with the rater (`statements.rater_by_key`), once: a later look is after a write.
    read, rater.trial_read = getattr(rater, "trial_read", None), None
    trial = read[1] if read and read[0] == token else statements.trial_of(rater, token, test)
    if trial is not None:
        return Trial, trial, delivery.delivered_of(trial, test)
    for model, owner in _other_sounds(rater):
        rows = model.objects.filter(owner, token=token)
        if model is DiversityTrial:  # rendered from delivered audio already
            row = rows.select_related("item__audio").first()
            if row is not None:
                return model, row, row.item.audio
            continue
        if model is ScreeningTrial:  # stereo on purpose: served as it was made
            row = rows.select_related("audio").first()
            if row is not None:
                return model, row, row.audio
            continue
        row = rows.select_related("audio").first()
        if row is not None:
            return model, row, delivery.delivered_audio(row.audio, test)
    raise ListeningError("No such audio.", 404)


def serve_audio(
    rater: Rater, token: str, range_header: str = "", *, sock=None, accel: bool = True
) -> HttpResponse:
    """The delivered audio behind one of the rater's tokens. The bytes are recorded as sent
    once they have left the server (`delivery.Sent`, acknowledged on `sock` where it is known)
    or the web server in front (its receipt; only when `accel`, the request having come through
    it); a range already recorded is not written again."""
    model, row, audio = _sound(rater, token)

    def sent(start: int, end: int, size: int) -> None:
        if not recorded(row, start, end, size):
            record_delivery(model, row, start, end, size)

    # A sound already delivered whole (preloaded, then fetched again in its turn) needs no
    # receipt: nginx then skips the report.
    whole = row.delivered_at is not None
    return delivery.audio_response(
        audio,
        range_header,
        sent=None if whole else sent,
        receipt_for=None if whole else (KIND_OF[model], row.pk),
        sock=sock,
        accel=accel,
    )


def redeem_receipt(value: str, completion: str, bytes_sent: str) -> None:
    """Record a delivery that the web server in front reports finished (`delivery.redeem`)."""
    redeemed = delivery.redeem(value, completion, bytes_sent)
    if redeemed is None:
        return
    kind, pk, start, end, size = redeemed
    model = KINDS[kind]
    if start == 0 and end + 1 >= size:  # the whole file, as players fetch it: no read
        statements.deliver_whole(model, pk, size, now())
        return
    row = model.objects.filter(pk=pk).first()
    if row is not None and not recorded(row, start, end, size):
        record_delivery(model, row, start, end, size)


# A page's event is a few short fields (under 200 bytes); this leaves room for any token.
EVENT_MAX_BYTES = 2048


@dataclass(frozen=True)
class PlayerEvent:
    """A player event as the page posts it: `{"token", "event", "t"[, "from"]}`."""

    token: str
    kind: str
    t: float
    seek_from: float | None = None


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_player_event(body: bytes) -> PlayerEvent:
    """The event a page posted, or ListeningError (400) naming every problem of its shape at
    once. The body is refused before it is parsed when too long to be one, and a body nested
    deeper than the parser's recursion allows is refused as malformed: neither is a server
    error. The values (is the token the rater's, is the time within the sound) are checked
    where the event is applied."""
    if len(body) > EVENT_MAX_BYTES:
        raise ListeningError(
            f"A player event is at most {EVENT_MAX_BYTES} bytes; this one has {len(body)}."
        )
    try:
        data = json.loads(body or b"{}")
    except (ValueError, RecursionError):  # RecursionError: arrays or objects nested too deep
        data = None
    if not isinstance(data, dict):
        raise ListeningError(
            'The event must be a JSON object: {"token": ..., "event": ..., "t": ...}.'
        )
    problems = [
        f"{name} must be {what}"
        for name, what, fits in (
            ("token", "text", isinstance(data.get("token"), str)),
            ("event", "text", isinstance(data.get("event"), str)),
            ("t", "a number of seconds", _number(data.get("t"))),
            ("from", "a number of seconds", data.get("from") is None or _number(data["from"])),
        )
        if not fits
    ]
    if problems:
        raise ListeningError("The event is malformed: " + "; ".join(problems) + ".")
    return PlayerEvent(data["token"], data["event"], data["t"], data.get("from"))


def player_event(rater: Rater, token: str, kind: str, t, *, seek_from=None) -> Listened:
    """One event of the page's player (play, pause, seeking, timeupdate, ended) for one of the
    rater's sounds; returns the server's verdict on it so far."""
    model, row, audio = _sound(rater, token)
    row = record_event(rater, model, row, kind, t, audio.duration_s, seek_from=seek_from)
    what = {FamiliarizationClip: "example", DiversityTrial: "file"}.get(model, "sound")
    return listened(
        row, audio.duration_s, selectors.listening_test(rater.challenge), what=what, rater=rater
    )


def listened_now(
    rater: Rater, token: str, test: ListeningTest | None = None
) -> tuple[Heard, Listened]:
    """One of the rater's sounds (by its token) as it is now, with the server's verdict on it,
    for the page to open its scales."""
    test = test or selectors.listening_test(rater.challenge)
    _, row, audio = _sound(rater, token, test)
    return row, listened(row, audio.duration_s, test, rater=rater)


def shown_now(
    rater: Rater, token: str, test: ListeningTest | None = None
) -> tuple[Heard, Listened]:
    """A page showing one of the rater's sounds (re)loaded: whatever was playing stops (written
    only when something was), and the sound as it is now with the server's verdict."""
    page_shown(rater)
    return listened_now(rater, token, test)
