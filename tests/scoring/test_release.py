"""The data release of a published snapshot: a versioned bundle with every table, its datasheet
and Data Package descriptor; rescored from the bundle alone it gives the published numbers; no
participant id, e-mail, network or free text in any of its files; audio only by the team's
consent."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from raters import enrolment, preparation, sessions
from raters.models import Rater
from scoring import services
from scoring.inputs import ScoringInputError
from scoring.models import DataRelease, ScoringSettings
from scoring.offline import run as score_offline
from scoring.release import make_release, open_archive
from stimuli.errors import Refused
from stimuli.models import Challenge, ChallengeRole, Clip, FadResult, PredictorScore, System
from tests.listening_setup import answer_session, build_listening_challenge
from tests.pairs_setup import build_pairs_challenge, vote_session

pytestmark = pytest.mark.django_db

DOCS = Path(__file__).resolve().parents[2] / "docs"
# What must never be in a release: each rater's identifiers and e-mail, and the free text.
SECRETS = {
    "participant_id": "PROLIFIC-5f3c9a7e1b",
    "study_id": "STUDY-77c1e0",
    "crowd_session_id": "SESSION-a9d2f4",
    "network": "203.0.113.0/24",
    "label": "Met her at the workshop, hard of hearing on the left",
}
RATER_EMAIL = "listener.jane@example.org"
ORGANIZER_EMAIL = "olivia.org@example.org"


@pytest.fixture
def published(organizer):
    challenge = build_listening_challenge(slug="release", categories=2)
    challenge.contact_email = "contact-release@example.org"
    challenge.save()
    organizer.first_name, organizer.last_name = "Olivia", "Organa"
    organizer.email = ORGANIZER_EMAIL
    organizer.save()
    ChallengeRole.objects.get_or_create(
        challenge=challenge, user=organizer, defaults={"role": "owner"}
    )
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 30
    settings.save()
    # FAD and KAD... here FAD by one model, against both references.
    for system in System.objects.filter(challenge=challenge):
        for n, category in enumerate(challenge.categories.all()):
            for reference, value in (("development", 3.0 + n), ("evaluation", 4.5 + n)):
                FadResult.objects.create(
                    challenge=challenge, system=system, category=category, reference=reference,
                    model_id="vggish-test", value=value + 0.25 * len(system.name),
                    n_clips=2, n_reference=9,
                )  # fmt: skip
    add_predictor_values(challenge)
    preparation.set_open(challenge, True)
    listener = get_user_model().objects.create_user("jane", email=RATER_EMAIL)
    for n in range(4):
        rater = enrolment.invite(challenge, label=SECRETS["label"] if n == 0 else "")
        if n == 0:
            Rater.objects.filter(pk=rater.pk).update(
                participant_id=SECRETS["participant_id"],
                study_id=SECRETS["study_id"],
                crowd_session_id=SECRETS["crowd_session_id"],
                network=SECRETS["network"],
                user=listener,
            )
            rater.refresh_from_db()
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)
        while (step := sessions.next_session(rater)).session is not None:
            answer_session(rater, step.session, quality=3 + n, fit=4 + n)
    snapshot = services.publish(challenge, organizer)
    assert snapshot.final and snapshot.result["tracks"]
    return challenge, snapshot


def add_predictor_values(challenge: Challenge) -> None:
    """Every system clip's values of both predictors, as their job stores them."""
    clips = Clip.objects.filter(challenge=challenge, role=Clip.Role.SYSTEM).order_by("pk")
    axes = [("aesthetics", a) for a in ("PQ", "PC", "CE", "CU")] + [("pam", "PAM")]
    PredictorScore.objects.bulk_create(
        PredictorScore(
            clip=clip, predictor=predictor, axis=axis, model_id=f"{predictor}@0a1b2c",
            value=(0.2 + 0.13 * (n % 5)) if axis == "PAM" else 3 + 0.7 * (n % 5) + 0.1 * k,
        )
        for n, clip in enumerate(clips)
        for k, (predictor, axis) in enumerate(axes)
    )  # fmt: skip


def read_rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


# Lists of sessions, in the order of the raters' names: the pseudonyms order them otherwise.
BY_RATER = ("flagged_sessions", "excluded_sessions", "self_ratings_removed")


def numbers(value):
    """The result's numbers and structure, without the input hashes (computed over the
    pseudonyms in a release) and the code version."""
    if isinstance(value, dict):
        return {
            k: sorted(json.dumps(x, sort_keys=True) for x in numbers(v))
            if k in BY_RATER and isinstance(v, list)
            else numbers(v)
            for k, v in value.items()
            if k not in ("inputs", "code_version")
        }
    if isinstance(value, list):
        return [numbers(v) for v in value]
    return value


def test_the_release_rescores_to_the_published_numbers_and_names_no_one(
    published, tmp_path, settings
):
    challenge, snapshot = published
    settings.MEDIA_ROOT = tmp_path / "media"
    # The team of A0 consents to its audio's release; B0's does not.
    System.objects.filter(challenge=challenge, name="A0").update(release_audio=True)
    call_command("release", challenge.slug, "--out", str(tmp_path / "out"), stdout=io.StringIO())
    bundle = tmp_path / "out" / "release-results-1-v1.0.0"
    assert (tmp_path / "out" / "release-results-1-v1.0.0.zip").is_file()
    names = {p.name for p in bundle.iterdir()}
    assert names >= {
        "ratings.csv", "diversity.csv", "screening.csv", "stimuli.csv", "anchors.csv", "fad.csv",
        "predictors.csv", "teams.csv", "result.json", "scoring.json", "challenge.yaml",
        "metadata.json", "README.md", "datapackage.json", "audio",
    }  # fmt: skip

    metadata = json.loads((bundle / "metadata.json").read_text())
    assert metadata["version"] == "1.0.0+snapshot.1"
    assert metadata["license"]["name"] == "CC-BY-4.0"
    assert metadata["creators"] == [{"name": "Olivia Organa", "role": "organizer"}]
    assert metadata["snapshot"] == 1 and metadata["code_version"] == snapshot.code_version

    # Rescored from the bundle alone: the published numbers, exactly.
    rescored = json.loads(score_offline({"release": bundle}))
    released = json.loads((bundle / "result.json").read_text())
    assert numbers(rescored) == numbers(released)
    assert rescored["tracks"] == json.loads(json.dumps(released["tracks"]))
    # The learned predictors' table too: the same axes, each system's means and the league's
    # rows of them, from predictors.csv.
    assert "predictors" in snapshot.input_hashes
    assert rescored["predictors"] == released["predictors"] == snapshot.result["predictors"]
    assert [r["pq"] for r in rescored["tracks"]["A"]] == [
        r["pq"] for r in snapshot.result["tracks"]["A"]
    ]
    assert rescored["metric_league"]["predictors"] == released["metric_league"]["predictors"]
    predictors = read_rows(bundle / "predictors.csv")
    assert len(predictors) == 2 * 2 * 5  # systems, categories, axes
    assert {r["model_id"] for r in predictors} == {"aesthetics@0a1b2c", "pam@0a1b2c"}
    assert all(r["system_id"].startswith("S") and r["low"] for r in predictors)
    with pytest.raises(ScoringInputError, match="drop --predictors"):
        score_offline({"release": bundle, "predictors": bundle / "predictors.csv"})
    # The released result is the published one with the raters under their pseudonyms.
    assert [r["final"] for r in released["tracks"]["A"]] == [
        r["final"] for r in snapshot.result["tracks"]["A"]
    ]
    assert rescored["settings"] == snapshot.settings
    # The definition the snapshot was computed under, with the contact address withheld as a
    # value (the file stays valid); its scoring settings rescore the bundle alike.
    frozen = (bundle / "challenge.yaml").read_text()
    assert frozen == snapshot.definition.replace(challenge.contact_email, "'[withheld]'")
    scoring = json.loads((bundle / "scoring.json").read_text())
    assert scoring["definition_sha256"] == snapshot.definition_sha256
    by_file = json.loads(score_offline({"release": bundle, "challenge": bundle / "challenge.yaml"}))
    assert numbers(by_file) == numbers(released)

    ratings = read_rows(bundle / "ratings.csv")
    assert len(ratings) == snapshot.result["counts"]["ratings"]
    pseudonyms = {r["rater"] for r in ratings}
    assert len(pseudonyms) == 4 and all(p.startswith("P") and len(p) == 13 for p in pseudonyms)
    codes = set(Rater.objects.filter(challenge=challenge).values_list("code", flat=True))
    assert not pseudonyms & codes
    row = next(r for r in ratings if r["role"] == "trial")
    assert len(row["stimulus"]) == 64 and row["system_id"].startswith("S")
    assert row["plays"] != "" and row["heard_fraction"] != "" and row["excluded"] == "False"
    assert {r["role"] for r in ratings} >= {"trial", "anchor_hq_goodfit", "anchor_lq_poorfit"}
    # Every sound rated is listed by hash: system sounds in stimuli.csv, checks in anchors.csv.
    listed = {r["sha256"] for r in read_rows(bundle / "stimuli.csv")}
    listed |= {r["sha256"] for r in read_rows(bundle / "anchors.csv")}
    assert {r["stimulus"] for r in ratings} <= listed
    # Audio by consent: A0's sounds, never B0's, anchors' or gold's.
    stimuli = read_rows(bundle / "stimuli.csv")
    consented = {r["sha256"] for r in stimuli if r["system"] == "A0"}
    assert {p.stem for p in (bundle / "audio").iterdir()} == consented
    assert all(r["audio_included"] == ("True" if r["system"] == "A0" else "False")
               for r in stimuli)  # fmt: skip
    fad = read_rows(bundle / "fad.csv")
    assert {r["model"] for r in fad} == {"vggish-test"} and len(fad) == 4

    # Nothing that names a rater, in any file: ids, network, e-mails, the organizers' note.
    forbidden = [*SECRETS.values(), RATER_EMAIL, ORGANIZER_EMAIL, challenge.contact_email,
                 *codes]  # fmt: skip
    for path in [*bundle.rglob("*"), tmp_path / "out" / "release-results-1-v1.0.0.zip"]:
        if path.is_file():
            data = path.read_bytes()
            if path.suffix == ".zip":
                with zipfile.ZipFile(path) as archive:
                    data = b"".join(archive.read(n) for n in archive.namelist())
            for secret in forbidden:
                assert secret.encode() not in data, f"{secret!r} in {path.name}"

    # The descriptor names every column of every table, in the file's order.
    package = json.loads((bundle / "datapackage.json").read_text())
    for resource in package["resources"]:
        if "schema" in resource:
            header = (bundle / resource["path"]).read_text().splitlines()[0].split(",")
            fields = resource["schema"]["fields"]
            assert [f["name"] for f in fields] == header
            assert all(f["description"] and f["type"] for f in fields)
    readme = (bundle / "README.md").read_text()
    assert "4 raters: 4 invited" in readme and "CC-BY-4.0" in readme
    assert "| `heard_fraction` | number |" in readme
    assert "### predictors.csv: Learned predictors" in readme
    assert "The learned predictors' means (PQ, PC, CE, CU, PAM) of 2 systems" in readme
    # The manual's example.
    (DOCS / "release-example.md").write_text(readme)

    # The stored copy, and the next release of the snapshot is the next version.
    made = DataRelease.objects.get(snapshot=snapshot)
    with open_archive(made) as handle:
        assert zipfile.ZipFile(handle).namelist()
    call_command("release", challenge.slug, "--out", str(tmp_path / "out"), stdout=io.StringIO())
    assert DataRelease.objects.latest("pk").version == "1.1.0+snapshot.1"


def test_predictor_values_changed_since_publication_refuse_the_release(published, tmp_path):
    challenge, snapshot = published
    PredictorScore.objects.filter(clip__challenge=challenge, axis="PAM").update(value=0.5)
    with pytest.raises(Refused, match="the predictors changed since results #1"):
        make_release(snapshot, out_dir=tmp_path)
    # And gone altogether: the release would lack a table the results were scored from.
    PredictorScore.objects.filter(clip__challenge=challenge).delete()
    with pytest.raises(Refused, match="the predictors changed"):
        make_release(snapshot, out_dir=tmp_path)
    assert not DataRelease.objects.exists()


def test_the_descriptor_is_a_valid_data_package(published, tmp_path, settings):
    frictionless = pytest.importorskip("frictionless")
    challenge, _ = published
    settings.MEDIA_ROOT = tmp_path / "media"
    call_command("release", challenge.slug, "--out", str(tmp_path), stdout=io.StringIO())
    report = frictionless.validate(tmp_path / "release-results-1-v1.0.0" / "datapackage.json")
    assert report.valid, report.flatten(["rowNumber", "fieldName", "type", "note"])


def test_a_challenge_without_final_results_is_refused(organizer, tmp_path):
    challenge = build_listening_challenge(slug="unpublished", categories=1, prepared=False)
    with pytest.raises(CommandError, match="has no final results to release yet"):
        call_command("release", challenge.slug, "--out", str(tmp_path))
    assert not DataRelease.objects.exists()
    assert Challenge.objects.filter(slug="unpublished").exists()


@pytest.mark.django_db
def test_a_release_of_votes_rescores_to_the_published_pairwise_section(
    organizer, tmp_path, settings
):
    settings.MEDIA_ROOT = tmp_path / "media"
    challenge = build_pairs_challenge(
        slug="release-votes", categories=1, pairs_per_session=6, anchor_pairs_per_session=2
    )
    ChallengeRole.objects.get_or_create(
        challenge=challenge, user=organizer, defaults={"role": "owner"}
    )
    services.scoring_settings(challenge)
    ScoringSettings.objects.filter(challenge=challenge).update(bootstrap_samples=20)
    preparation.set_open(challenge, True)
    names = {s.pk: s.name for s in System.objects.filter(challenge=challenge)}
    for n in range(5):
        rater = enrolment.invite(challenge)
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)

        def choose(pair, n=n):  # the system named first wins, the anchor loses; a tie now and then
            if pair.left.stimulus is None or pair.right.stimulus is None:
                side = "right" if pair.left.stimulus is None else "left"
                return side, side
            left = names[pair.left.stimulus.system_id]
            winner = "left" if left < names[pair.right.stimulus.system_id] else "right"
            return winner, "tie" if n == 2 else winner

        vote_session(rater, sessions.next_session(rater).session, choose)
    snapshot = services.publish(challenge, organizer)
    published = snapshot.result["pairwise"]
    assert "votes" in snapshot.input_hashes and published["tracks"]
    make_release(snapshot, out_dir=tmp_path / "out")
    (bundle,) = (p for p in (tmp_path / "out").iterdir() if p.is_dir())
    rows = list(csv.DictReader((bundle / "votes.csv").open()))
    assert {r["role"] for r in rows} == {"pair", "anchor_pair"}
    assert all(len(r["left_stimulus"]) == 64 and len(r["right_stimulus"]) == 64 for r in rows)
    assert not any(r["rater"].startswith("R") and len(r["rater"]) == 9 for r in rows)
    assert "votes on A/B trials" in (bundle / "README.md").read_text()
    rescored = json.loads(score_offline({"release": bundle}))
    released = json.loads((bundle / "result.json").read_text())
    assert rescored["pairwise"] == released["pairwise"]
