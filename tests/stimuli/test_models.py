"""Production settings pass Django's deployment checks; models keep their rules in the database."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
from django.db import IntegrityError, transaction

from stimuli.models import AudioFile, Clip, System
from stimuli.services import create_system, create_team
from tests import ROOT_DIR

ROOT = ROOT_DIR


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DEBUG", "SECURE_SSL_REDIRECT", "STATIC_MANIFEST"}
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_check_deploy_passes_with_production_settings():
    result = manage(
        "check", "--deploy", "--fail-level", "WARNING",
        DEBUG="0", SECRET_KEY=secrets.token_urlsafe(50), ALLOWED_HOSTS="foley.example.org",
        FOLEY_SITE_URL="https://foley.example.org",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_production_refuses_to_start_without_a_secret_key():
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        env={**env, "DEBUG": "0", "SECRET_KEY": ""}, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off." in result.stderr


@pytest.mark.django_db
def test_clip_role_and_system_must_agree(challenge):
    audio = AudioFile.objects.create(
        sha256="a" * 64, file="x", size_bytes=1, sample_rate=22050, channels=1, bit_depth=16,
        frames=1, duration_s=1 / 22050,
    )  # fmt: skip
    category = challenge.categories.first()
    with pytest.raises(IntegrityError), transaction.atomic():
        Clip.objects.create(challenge=challenge, category=category, role="system", audio=audio)
    Clip.objects.create(challenge=challenge, category=category, role="development", audio=audio)
    with pytest.raises(IntegrityError), transaction.atomic():
        Clip.objects.create(challenge=challenge, category=category, role="development", audio=audio)


@pytest.mark.django_db
def test_audio_hash_must_be_hex():
    with pytest.raises(IntegrityError), transaction.atomic():
        AudioFile.objects.create(
            sha256="not-a-hash", file="x", size_bytes=1, sample_rate=22050, channels=1,
            bit_depth=16, frames=1, duration_s=1.0,
        )  # fmt: skip


@pytest.mark.django_db
def test_public_ids_are_random_and_unrelated_to_names(challenge):
    team = create_team(challenge, name="Lab")
    track = challenge.tracks.get(code="A")
    ids = {create_system(team=team, track=track, name=f"Lab_{n}").public_id for n in range(20)}
    assert len(ids) == 20
    assert all(len(i) == 9 and i.startswith("S") and "Lab" not in i for i in ids)
    assert not any(i.endswith(str(n)) for n, i in enumerate(sorted(ids)) if False)
    assert System.objects.count() == 20


@pytest.mark.django_db
def test_team_and_track_of_another_challenge_are_refused(challenge):
    from django.core.exceptions import ValidationError

    from stimuli.services import create_challenge

    other = create_challenge(name="Other", slug="other")
    team = create_team(challenge, name="Lab")
    with pytest.raises(ValidationError, match="different challenges"):
        create_system(team=team, track=other.tracks.get(code="A"), name="X")


def without_secret() -> dict[str, str]:
    """A fresh install: neither SECRET_KEY nor DEBUG set."""
    return {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG"}}


def test_researchers_command_line_tools_run_without_a_secret_key(tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    np.save(tmp_path / "a.npy", rng.normal(size=(50, 4)))
    np.save(tmp_path / "b.npy", rng.normal(1.0, 1.0, size=(50, 4)))
    env = without_secret()
    fad = subprocess.run(
        [sys.executable, "manage.py", "compute_fad", str(tmp_path / "a.npy"), str(tmp_path / "b.npy")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert fad.returncode == 0, fad.stderr
    assert '"fad": ' in fad.stdout
    kad = subprocess.run(
        [sys.executable, "manage.py", "compute_kad", str(tmp_path / "a.npy"), str(tmp_path / "b.npy")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert kad.returncode == 0, kad.stderr
    assert '"kad": ' in kad.stdout
    # score_offline parses its files: a missing one is its own error, not the settings'.
    scored = subprocess.run(
        [sys.executable, "manage.py", "score_offline", f"--ratings={tmp_path / 'none.csv'}",
         f"--diversity={tmp_path / 'none.csv'}", f"--fad={tmp_path / 'none.csv'}",
         f"--teams={tmp_path / 'none.csv'}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "SECRET_KEY" not in scored.stderr and "none.csv" in scored.stderr
    checked = subprocess.run(
        [sys.executable, "manage.py", "validate_generator", "tests.generator_fixtures.good",
         "--clips=1", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "SECRET_KEY" not in checked.stderr
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_manage_py_help_lists_every_command_without_a_secret_key():
    helped = subprocess.run(
        [sys.executable, "manage.py", "--help"],
        cwd=ROOT, env=without_secret(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert helped.returncode == 0 and "Traceback" not in helped.stderr
    assert "import_clips" in helped.stdout and "settings are not properly" not in helped.stdout


def test_the_web_server_still_refuses_to_start_without_a_secret_key():
    env = without_secret()
    served = subprocess.run(
        [sys.executable, "-c", "import foley_platform.wsgi"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert served.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off." in served.stderr
    # A keyless tool's name elsewhere on the command line opens nothing.
    other = subprocess.run(
        [sys.executable, "manage.py", "runserver", "compute_fad"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "SECRET_KEY must be set when DEBUG is off." in other.stderr


def test_the_web_process_imports_neither_torch_nor_scikit_learn_nor_matplotlib():
    code = (
        "import sys, django; django.setup(); import foley_platform.urls, foley_platform.wsgi; "
        "from django.urls import get_resolver; get_resolver().url_patterns; "
        "print(sorted(m for m in ('torch', 'sklearn', 'matplotlib') if m in sys.modules))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "foley_platform.settings"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
