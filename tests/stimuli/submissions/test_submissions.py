"""Submitting: deadlines and quotas under racing requests, the review window's frozen
weights, a track's rule on external data, and a platform failure that costs no quota.

The races run on PostgreSQL with real threads, each on its own connection, released together
from a barrier: the challenge lock decides them one after another."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.db import connection
from django.utils import timezone

from stimuli.errors import Refused
from stimuli.models import Team
from stimuli.submissions import schedule, selectors
from stimuli.submissions.models import Submission
from stimuli.submissions.services import QuotaExceeded, submit

from .conftest import baseline_archive, meta, upload

pytestmark = pytest.mark.django_db(transaction=True)


def _race(n: int, call) -> list:
    """Run `call(i)` in n threads released together; each outcome or exception, in order."""
    barrier = threading.Barrier(n)
    outcomes: list = [None] * n

    def run(i: int) -> None:
        try:
            barrier.wait()
            outcomes[i] = call(i)
        except Exception as exc:  # collected, asserted by the test
            outcomes[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def _team(make_member, name="Barkers", username="ann"):
    user = make_member(name, username)
    return user, Team.objects.get(name=name)


def test_daily_quota_holds_under_ten_parallel_posts(
    open_challenge, make_member, queued_only, media_root
):
    schedule.set_schedule(open_challenge, submissions_per_day=3)
    user, team = _team(make_member)
    data = baseline_archive()
    outcomes = _race(10, lambda i: submit(team, user, meta("Barker"), upload(data)))
    accepted = [o for o in outcomes if isinstance(o, Submission)]
    refused = [o for o in outcomes if isinstance(o, QuotaExceeded)]
    assert len(accepted) == 3 and len(refused) == 7, outcomes
    assert sorted(s.version for s in accepted) == [1, 2, 3]
    assert "the limit is 3 a day" in refused[0].message
    assert Submission.objects.filter(team=team).count() == 3
    # One file for the one content; the refused requests stored nothing.
    assert [p.name for p in (media_root / "submissions").iterdir()] == [
        accepted[0].archive.split("/")[1]
    ]


def test_systems_per_track_hold_under_parallel_posts(open_challenge, make_member, queued_only):
    schedule.set_schedule(open_challenge, submissions_per_day=20, systems_per_track=4)
    user, team = _team(make_member)
    data = baseline_archive()
    outcomes = _race(10, lambda i: submit(team, user, meta(f"System {i}"), upload(data)))
    accepted = [o for o in outcomes if isinstance(o, Submission)]
    assert len(accepted) == 4, outcomes
    assert all(
        "systems on Track A; the limit is 4" in o.message for o in outcomes if o not in accepted
    )


def test_submission_after_the_deadline_is_refused_with_the_reason(
    open_challenge, make_member, media_root
):
    user, team = _team(make_member)
    past = timezone.now() - dt.timedelta(days=10)
    schedule.set_schedule(open_challenge, submission_deadline=past, evaluation_opens=None)
    with pytest.raises(Refused) as refused:
        submit(team, user, meta(), upload(baseline_archive()))
    assert refused.value.status == 409
    assert (
        "deadline passed" in refused.value.message
        and "review window closed" in refused.value.message
    )
    assert not Submission.objects.exists()
    assert not (media_root / "submissions").exists()


def test_ten_requests_racing_the_deadline(open_challenge, make_member, queued_only):
    """The deadline passes while ten requests wait on the challenge lock: each is decided by
    the server's clock read under the lock, so none that got the lock after it is accepted."""
    schedule.set_schedule(open_challenge, submissions_per_day=20, review_days=0)
    user, team = _team(make_member)
    data = baseline_archive()
    # Holds the lock while the deadline passes (so every waiter meets the passed deadline).
    released = threading.Event()
    locked = threading.Event()

    def hold_lock_past_deadline() -> None:
        from django.db import transaction

        from stimuli.submissions.schedule import lock_challenge

        try:
            with transaction.atomic():
                lock_challenge(open_challenge.pk)
                schedule_row = selectors.schedule(open_challenge)
                schedule_row.submission_deadline = timezone.now()
                schedule_row.save(update_fields=["submission_deadline"])
                locked.set()
                released.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_lock_past_deadline)
    holder.start()
    locked.wait(30)

    def post(i):
        if i == 0:
            # The last request to start releases the holder once the others queue at the lock.
            _wait_for_lock_waiters(9)
            released.set()
        return submit(team, user, meta("Barker"), upload(data))

    outcomes = _race(10, post)
    holder.join()
    assert all(isinstance(o, Refused) and "deadline passed" in o.message for o in outcomes), (
        outcomes
    )
    assert not Submission.objects.exists()


def _wait_for_lock_waiters(n: int) -> None:
    """Until `n` other connections wait on a row lock (a state in pg_stat_activity)."""
    from tests.conftest import wait_until

    def waiting():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            )
            return cursor.fetchone()[0] >= n

    wait_until(waiting, f"{n} requests waiting on the challenge lock", timeout=60)


def test_external_data_refused_on_a_track_that_forbids_it(open_challenge, make_member):
    user, team = _team(make_member)
    with pytest.raises(Refused) as refused:
        submit(
            team, user,
            meta(track="B", external_data=True, external_data_sources="AudioSet"),
            upload(baseline_archive()),
        )  # fmt: skip
    message = refused.value.message
    assert "Track B forbids external data (its rule: Development set only" in message
    assert not Submission.objects.exists()


def test_extension_gives_one_team_more_time(open_challenge, make_member, organizer, queued_only):
    user, team = _team(make_member)
    schedule.set_schedule(
        open_challenge,
        submission_deadline=timezone.now() - dt.timedelta(days=9),
        evaluation_opens=None,
    )
    with pytest.raises(Refused):
        schedule.extend_deadline(
            team, until=timezone.now() + dt.timedelta(days=1), reason=" ", by=organizer
        )
    schedule.extend_deadline(
        team,
        until=timezone.now() + dt.timedelta(days=1),
        reason="Power cut at the lab",
        by=organizer,
    )
    assert submit(team, user, meta(), upload(baseline_archive())).version == 1


def test_a_check_whose_worker_was_lost_frees_the_quota(
    open_challenge, make_member, queued_only, client, settings
):
    """No worker ever takes the check (its worker died with it): once its heartbeat is stale,
    the version is the platform's failure and the day's quota is free again."""
    from django.urls import reverse

    from stimuli.models import Job

    schedule.set_schedule(open_challenge, submissions_per_day=1)
    user, team = _team(make_member)
    lost = submit(team, user, meta(), upload(baseline_archive()))
    Job.objects.filter(pk=lost.job_id).update(
        state=Job.State.RUNNING, updated_at=timezone.now() - dt.timedelta(hours=1)
    )
    client.force_login(user)
    html = client.get(reverse("teams:submission", args=["teams", lost.pk])).content.decode()
    assert "the worker was lost" in html and "does not count against your" in html
    lost.refresh_from_db()
    assert lost.state == Submission.State.PLATFORM_ERROR and not lost.counts_in_quota
    assert submit(team, user, meta(), upload(baseline_archive())).version == 2
