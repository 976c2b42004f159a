"""The worker's check of a team's submission: the organizer path's sandbox and validator,
example clips, projected time against the budget, FAD-dev beside the baseline's; the review
window's frozen weights; a platform failure that costs no quota; hostile generators refused.

Tasks run in-process here, in the real sandbox (bubblewrap, seccomp, cgroups)."""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from pathlib import Path

import pytest
from django.utils import timezone

from sandbox import isolation
from stimuli.errors import Refused
from stimuli.models import Team
from stimuli.submissions import schedule
from stimuli.submissions.models import Submission
from stimuli.submissions.services import QuotaExceeded, submit
from tests.stimuli.generators.test_sandbox_hostile import (
    ATTACK_NAMES,
    _after,
    _case,
    _expected,
    _needs_host_service,
    limits_for,
)

from .conftest import baseline_archive, meta, upload

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).resolve().parents[2] / "generator_fixtures"


def _team(make_member, name="Barkers", username="ann"):
    user = make_member(name, username)
    return user, Team.objects.get(name=name)


def test_baseline_gets_report_examples_projection_and_fad_dev(development_set, make_member):
    user, team = _team(make_member)
    submission = submit(team, user, meta(), upload(baseline_archive()))
    submission.refresh_from_db()
    assert submission.state == Submission.State.VALID, submission.report
    report, feedback = submission.report, submission.feedback
    assert "the same seed gives the same audio" in report["checks"]
    assert submission.clips.count() == 2 * 2  # two example clips of each of two categories
    assert feedback["projected_s"] < feedback["budget_s"] and feedback["evaluation_clips"] == 20
    fad = feedback["fad_dev"]["categories"]
    assert set(fad) == {"dog_bark", "rain"}
    assert all(v["system"] >= 0 and v["baseline"] >= 0 for v in fad.values())
    # The members hear of it by e-mail.
    from django.core import mail

    assert [m.subject for m in mail.outbox] == ["[Teams] Barker v1: valid"]
    assert mail.outbox[0].bcc == ["ann@example.org"]


def test_the_counting_version_is_the_code_generation_runs(open_challenge, make_member):
    """The latest valid version counts unless the team chooses another; the system's generator
    (what the organizers' generation runs at evaluation) follows, never trusted."""
    from stimuli.models import Generator
    from stimuli.submissions.services import choose_version

    user, team = _team(make_member)
    first = submit(team, user, meta(), upload(baseline_archive()))
    second = submit(team, user, meta(), upload(baseline_archive(code_suffix="\n# v2\n")))
    generator = Generator.objects.get(system=second.system)
    assert generator.archive_sha256 == second.archive_sha256
    assert generator.state == Generator.State.VALID and not generator.trusted
    choose_version(first, user)
    generator.refresh_from_db()
    assert generator.archive_sha256 == first.archive_sha256


def test_over_the_compute_budget_is_refused_with_the_reason(development_set, make_member):
    schedule.set_schedule(development_set, compute_budget_s=0.001)
    user, team = _team(make_member)
    submission = submit(team, user, meta(), upload(baseline_archive()))
    submission.refresh_from_db()
    assert submission.state == Submission.State.INVALID
    assert "over the challenge's compute budget" in submission.report["summary"]


def _into_review(challenge) -> None:
    schedule.set_schedule(
        challenge, submission_deadline=timezone.now() - dt.timedelta(hours=1), review_days=4
    )


def test_review_window_takes_a_code_fix_and_refuses_changed_weights(open_challenge, make_member):
    user, team = _team(make_member)
    first = submit(team, user, meta(), upload(baseline_archive()))
    first.refresh_from_db()
    assert first.state == Submission.State.VALID
    _into_review(open_challenge)
    fix = submit(team, user, meta(), upload(baseline_archive(code_suffix="\n# fixed a typo\n")))
    assert fix.in_review and fix.version == 2
    with pytest.raises(Refused) as refused:
        submit(team, user, meta(), upload(baseline_archive(weights=b"retrained")))
    assert "foley_baseline/weights.npy changed (model data" in refused.value.message
    with pytest.raises(Refused, match="declared settings changed: brightness"):
        submit(team, user, meta(config={"brightness": 0.2}), upload(baseline_archive()))
    with pytest.raises(Refused, match="only a fix of a system submitted before the deadline"):
        submit(team, user, meta("New system"), upload(baseline_archive()))


def test_platform_failure_leaves_the_quota_untouched(open_challenge, make_member, monkeypatch):
    """The worker's sandbox is unavailable (no bubblewrap): the version is the platform's
    failure and the day's one submission is still free."""
    schedule.set_schedule(open_challenge, submissions_per_day=1)
    user, team = _team(make_member)
    monkeypatch.setenv("FOLEY_SANDBOX_BWRAP", "/nonexistent/bwrap")
    isolation.probe.cache_clear()
    try:
        failed = submit(team, user, meta(), upload(baseline_archive()))
    finally:
        monkeypatch.undo()
        isolation.probe.cache_clear()
    failed.refresh_from_db()
    assert failed.state == Submission.State.PLATFORM_ERROR and not failed.counts_in_quota
    assert "could not check" in failed.report["summary"]
    accepted = submit(team, user, meta(), upload(baseline_archive()))
    accepted.refresh_from_db()
    assert accepted.state == Submission.State.VALID
    with pytest.raises(QuotaExceeded):
        submit(team, user, meta(), upload(baseline_archive()))


def _fixture_archive(name: str) -> bytes:
    """A hostile fixture generator as a team's archive: the module and its helper."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        source = (FIXTURES / f"{name}.py").read_text().replace("from ._common", "from .common")
        zf.writestr("hostile/__init__.py", source)
        zf.writestr("hostile/common.py", (FIXTURES / "_common.py").read_text())
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("fixture", "code"),
    [
        ("network", "network"),
        ("writes_outside", "write_outside"),
        ("memory_hog", "memory"),
        ("nan_output", "not_finite"),
        ("wrong_rate", "wrong_sample_rate"),
        ("missing_function", "missing_function"),
    ],
)
def test_hostile_generators_are_refused_through_the_team_path(
    open_challenge, make_member, settings, fixture, code
):
    settings.FOLEY_SANDBOX_LIMITS = {**settings.FOLEY_SANDBOX_LIMITS, "memory_mb": 300,
                                     "load_timeout_s": 20, "call_timeout_s": 10}  # fmt: skip
    user, team = _team(make_member)
    submission = submit(team, user, meta(), upload(_fixture_archive(fixture)))
    submission.refresh_from_db()
    assert submission.state == Submission.State.INVALID, submission.report
    codes = {p["code"] for p in submission.report["problems"]}
    assert any(c.startswith(code) for c in codes), codes


# Every attack of the organizer path's hostile-generator test, submitted by a team: the archive
# holds tests/generator_fixtures/attacker.py, the attack is its declared settings.


@pytest.mark.parametrize("name", ATTACK_NAMES)
def test_every_hostile_attack_is_refused_through_the_team_path(
    name, open_challenge, make_member, settings, media_root, tmp_path, udp_listener, bystander
):
    _needs_host_service(name)
    _name, config, code, words, check = _case(name, media_root, tmp_path, udp_listener, bystander)
    settings.FOLEY_SANDBOX_LIMITS = {**settings.FOLEY_SANDBOX_LIMITS, **limits_for(code)}
    user, team = _team(make_member)
    submission = submit(team, user, meta(config=config), upload(_fixture_archive("attacker")))
    submission.refresh_from_db()
    assert submission.state == Submission.State.INVALID, f"{name}: the attack worked"
    first = submission.report["problems"][0]
    _expected(code, words, first["code"], first["message"])
    assert submission.counts_in_quota and not submission.clips.exists()
    _after(name, check, udp_listener, bystander)
