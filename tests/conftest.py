"""Shared fixtures: users by role, a default challenge, audio and zip factories, and a real
Celery worker process for integration tests.

Integration tests (marker `integration`) need PostgreSQL as the test database and Redis as the
broker. Without them they are skipped with the reason, unless FOLEY_REQUIRE_SERVICES=1 (as in CI),
where a missing service fails the run instead. The same holds for Chromium, for the official
DCASE 2023 Task 7 statistics (`../shared/data/...` beside the checkout, or FOLEY_DCASE_STATS) and
for the generator sandbox (marker `sandbox`: bubblewrap, seccomp and a writable cgroup).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection

from tests.factories import make_wav, make_zip  # noqa: F401  (re-exported for tests)

ROOT = Path(__file__).resolve().parent.parent
REDIS_URL = os.environ.get("FOLEY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
REQUIRE_SERVICES = os.environ.get("FOLEY_REQUIRE_SERVICES") == "1"
DCASE_STATS = Path(
    os.environ.get(
        "FOLEY_DCASE_STATS", ROOT.parent / "shared/data/dcase2023_task7_eval_vggish_stats"
    )
)


def _redis_up() -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=1).ping())
    except Exception:
        return False


def _database_vendor() -> str:
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"]
    return "postgresql" if "postgresql" in engine else engine.rsplit(".", 1)[-1]


def pytest_report_header(config) -> list[str]:
    vendor = _database_vendor()
    redis_up = _redis_up()
    integration = vendor == "postgresql" and redis_up
    lines = [
        f"foley: database={vendor}, redis={'up' if redis_up else 'down'}, "
        f"integration tests={'enabled' if integration else 'SKIPPED (need PostgreSQL and Redis)'}"
    ]
    if not integration and REQUIRE_SERVICES:
        lines.append("foley: FOLEY_REQUIRE_SERVICES=1, so integration tests will FAIL")
    return lines


def _missing_services() -> list[str]:
    missing = []
    if _database_vendor() != "postgresql":
        missing.append("PostgreSQL (set DATABASE_URL)")
    if not _redis_up():
        missing.append(f"Redis at {REDIS_URL}")
    return missing


# The fast selection (`pytest -m "not slow"`, CONTRIBUTING.md) leaves out what drives a browser,
# plays the adversary, runs the demo or a production process, or goes through nginx or docker:
# the whole suite (CI) runs them.
SLOW_PATHS = (
    "tests/adversary/",
    "tests/browser/",
    "tests/foley_platform/test_demo.py",
    "tests/foley_platform/test_production.py",
    "tests/foley_platform/test_nginx_limits.py",
    "tests/foley_platform/test_proxy_trust.py",
    "tests/foley_platform/test_deployment.py",
    "tests/stimuli/submissions/test_archive_through_proxy.py",
    "tests/stimuli/submissions/test_teams_browser.py",
    "tests/stimuli/generators/test_sandbox_hostile.py",
    "tests/raters/test_embedded_concurrency.py",
    # The slowest of the rest (`--durations`): a killed worker, released checkpoints' full-size
    # networks, generation in the sandbox, whole pipelines on a page or the command line.
    "tests/stimuli/objective/test_integration.py",
    "tests/stimuli/generators/test_integration.py",
    "tests/stimuli/objective/test_embeddings_passt.py::test_the_released_checkpoint",
    "tests/stimuli/objective/test_embeddings_panns.py::test_released_checkpoints",
    "tests/stimuli/objective/test_tf_checkpoint.py::test_vggish_loads_googles_checkpoint",
    "tests/stimuli/generators/test_jobs.py::test_generation_stores_clips_with_the_spec",
    "tests/stimuli/generators/test_jobs.py::test_interrupted_job_resumes",
    "tests/stimuli/generators/test_jobs.py::test_baseline_systems_for_the_demo",
    "tests/stimuli/submissions/test_feedback.py::test_every_hostile_attack_is_refused",
    "tests/stimuli/objective/test_pages.py::test_organizer_runs_evaluation_and_medoids",
    "tests/stimuli/objective/test_services.py::test_rerun_takes_every_embedding_from_the_cache",
    "tests/stimuli/objective/test_services.py::test_a_job_whose_worker_was_lost",
    "tests/stimuli/objective/test_services.py::test_fad_job_failing_on_its_last_category",
    "tests/stimuli/objective/test_prompt_scores.py::test_an_organizer_has_the_clips_scored",
    "tests/stimuli/objective/test_commands.py::test_evaluate_and_select_medoids_commands",
    "tests/raters/test_sessions.py::test_assignment_takes_least_rated_categories",
    "tests/stimuli/objective/test_services.py::test_clips_of_an_unfinished_generation",
    "tests/stimuli/objective/test_services.py::test_a_worker_whose_job_was_taken_over",
    "tests/stimuli/objective/test_services.py::test_medoids_are_distinct_deterministic",
    "tests/stimuli/objective/test_services.py::test_league_models_compute_fad",
    "tests/stimuli/objective/test_services.py::test_results_are_not_written_once_the_phase",
    "tests/stimuli/objective/test_services.py::test_evaluation_ranks_systems_by_fad",
    "tests/stimuli/objective/test_services.py::test_kad_beside_fad_per_system_category",
    "tests/stimuli/objective/test_pages.py::test_failed_job_is_retried_from_the_page",
    "tests/stimuli/objective/test_pages.py::test_api_runs_the_stage_and_serves_the_results",
    "tests/stimuli/objective/test_pages.py::test_api_retry_is_refused_where_the_page_refuses",
    "tests/stimuli/objective/test_pages.py::test_clips_page_pages_and_browses_the_medoids",
    "tests/stimuli/objective/test_fad.py::test_a_system_with_fewer_embeddings_than_dimensions",
    "tests/stimuli/objective/test_prompt_scores.py::test_scores_are_asked_for_queued",
    "tests/stimuli/objective/test_prompt_scores.py::test_both_branches_load_from_one_checkpoint",
    "tests/stimuli/objective/test_embeddings_passt.py::test_timestamp_embeddings_are_the_releases",
    "tests/stimuli/objective/test_embeddings_openl3.py::test_embeddings_match_torchopenl3",
    "tests/stimuli/generators/test_jobs.py::test_a_listening_test_opened_during_the_job",
    "tests/stimuli/generators/test_jobs.py::test_a_stale_validation_does_not_judge_newer_code",
    "tests/raters/test_text_prompts.py::test_prompts_make_sets_and_one_answer_each",
    "tests/raters/test_judges_judged.py::test_a_judge_who_fails_the_gold_clip",
    "tests/raters/test_proxy.py::test_nginx_sends_every_sound",
    "tests/raters/test_demo.py::test_simulated_raters_give_scoring_real_results",
    "tests/stimuli/test_models.py::test_researchers_command_line_tools_run",
    "tests/scoring/test_text_prompts.py::test_results_are_published_in_the_snapshot",
    "tests/scoring/test_integration.py::test_concurrent_publications_get_consecutive",
    "tests/stimuli/submissions/test_demo.py::test_teams_demo_has_a_valid_and_a_failing",
    "tests/stimuli/submissions/test_feedback.py::test_review_window_takes_a_code_fix",
    "tests/stimuli/submissions/test_feedback.py::test_the_counting_version_is_the_code",
    "tests/stimuli/submissions/test_pages.py::test_organizer_sees_teams_versions_diff",
    # Races of requests at once on the real database (each test empties every table after it),
    # releases built and rescored, and jobs run by a worker process of its own.
    "tests/raters/test_concurrency.py",
    "tests/scoring/test_release.py",
    "tests/scoring/test_definition_frozen.py::test_the_snapshots_definition_applied_elsewhere",
    "tests/scoring/test_league.py::test_each_model_is_ranked_by_fad_and_by_kad",
    "tests/scoring/test_integration.py::test_a_worker_runs_the_publish_job",
    "tests/stimuli/objective/test_pages.py::test_the_medoids_show_each_clips_predictor_values",
    "tests/stimuli/objective/test_pages.py::test_organizer_runs_the_predictors_from_the_page",
    "tests/stimuli/objective/test_predictor_scores.py::test_the_command_needs_no_secret_key",
    "tests/raters/test_text_prompts.py::test_prompts_are_generated_on_the_gpu_queue_worker",
    "tests/stimuli/uploads/test_integration.py::test_worker_imports_an_upload_and_rejects_a_bad",
)


# The longest tests and about how long each takes with four workers on two cores (`--durations`;
# a parametrized test's every case). Each starts its worker's share of the suite: `--dist
# worksteal` (scripts/test) hands each worker a contiguous part of the list and later moves tests
# from the end of a long queue to an idle worker, never the head, so a long test queued behind
# another would run after it on the same worker. They are spread over the workers' parts, the
# longest first to the least loaded part.
LONGEST = {
    "tests/foley_platform/test_demo.py::test_demo_runs_the_whole_challenge_and_publishes": 270,
    "tests/adversary/test_headphone_reader.py": 90,
    "tests/adversary/test_gold_detectors.py::test_first_byte_times": 60,
    "tests/adversary/test_gold_detectors.py::test_the_synthesisers_own_renderings": 55,
    "tests/adversary/test_farm.py": 55,
    "tests/browser/test_pairs.py::test_a_crowd_worker": 45,
    "tests/browser/test_site_layout.py::test_every_page_of_a_published_challenge": 45,
    "tests/adversary/test_pairs.py::test_a_farm_voting_over_http": 45,
    "tests/adversary/test_listening.py::test_checkpoint_flooding": 40,
    "tests/adversary/test_pairs.py::test_sides_played_at_once": 40,
    "tests/adversary/test_anchors_detectors.py": 40,
    "tests/browser/test_screening.py::test_a_worker_who_cannot_hear_the_tone": 35,
    "tests/browser/test_screening.py::test_a_worker_who_hears_the_tone": 35,
}


def _expected_s(item) -> float:
    return next((s for prefix, s in LONGEST.items() if item.nodeid.startswith(prefix)), 0.0)


def _spread_longest(items: list, workers: int) -> list:
    """`items` reordered so that each of the `workers` contiguous parts xdist hands out (sized as
    it sizes them) starts with its share of the longest tests."""
    longest = sorted((item for item in items if _expected_s(item)), key=_expected_s, reverse=True)
    rest = iter(item for item in items if not _expected_s(item))
    sizes, remaining = [], len(items)
    for worker in range(workers):
        sizes.append(remaining // (workers - worker))
        remaining -= sizes[-1]
    parts: list[list] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for item in longest:
        open_parts = [w for w in range(workers) if len(parts[w]) < sizes[w]]
        worker = min(open_parts, key=lambda w: load[w])
        parts[worker].append(item)
        load[worker] += _expected_s(item)
    for worker, part in enumerate(parts):
        part.extend(next(rest) for _ in range(sizes[worker] - len(part)))
    return [item for part in parts for item in part]


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if "browser" in item.keywords or item.nodeid.startswith(SLOW_PATHS):
            item.add_marker(pytest.mark.slow)
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    items[:] = _spread_longest(items, workers)
    if any("sandbox" in item.keywords for item in items):
        from sandbox.isolation import probe

        if missing := probe().missing:
            reason = "the generator sandbox needs " + "; ".join(missing)
            for item in items:
                if "sandbox" in item.keywords:
                    item.user_properties.append(("missing_services", reason))
    if not any("integration" in item.keywords for item in items):
        return
    missing = _missing_services()
    if not missing:
        return
    reason = "integration test needs " + " and ".join(missing)
    for item in items:
        if "integration" in item.keywords:
            item.user_properties.append(("missing_services", reason))


def pytest_runtest_setup(item) -> None:
    for name, reason in item.user_properties:
        if name == "missing_services":
            if REQUIRE_SERVICES:
                pytest.fail(f"FOLEY_REQUIRE_SERVICES=1 but the {reason}", pytrace=False)
            pytest.skip(reason)
            return


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # Real hashing costs most of a second per user on a small machine; tests need no secrecy.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def rate_limits_off(settings):
    """Rate limits count per client address, and every test client is 127.0.0.1: they are off
    but in the tests of the limits themselves (`rate_limits`)."""
    from django.core.cache import cache

    settings.FOLEY_RATE_LIMITS_ENABLED = False
    cache.clear()


@pytest.fixture
def rate_limits(settings):
    settings.FOLEY_RATE_LIMITS_ENABLED = True
    return settings


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    """Each test stores audio in its own folder."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.MEDIA_ROOT.mkdir()
    return settings.MEDIA_ROOT


@pytest.fixture
def organizer(django_user_model):
    """An organizer named on every challenge of the test: those that exist and those the test
    creates later (organizers of other challenges are made by `organizer_of`)."""
    from django.contrib.auth.models import Group
    from django.db.models.signals import post_save

    from stimuli.models import Challenge
    from stimuli.permissions import name_owner

    user = django_user_model.objects.create_user("olivia", password="organizer-pass-1")
    user.groups.add(Group.objects.get_or_create(name="organizers")[0])
    for existing in Challenge.objects.all():
        name_owner(existing, user)

    def named(sender, instance, created, **kwargs):
        if created:
            name_owner(instance, user)

    post_save.connect(named, sender=Challenge, weak=False, dispatch_uid="test-organizer")
    yield user
    post_save.disconnect(sender=Challenge, dispatch_uid="test-organizer")


@pytest.fixture
def organizer_of(django_user_model):
    """A user with `role` on `challenge` only: organizer_of(challenge, "viewer")."""
    from stimuli.models import ChallengeRole

    def make(challenge, role: str = "organizer", username: str | None = None):
        user = django_user_model.objects.create_user(
            username or f"{role}-of-{challenge.slug}", password="role-pass-1"
        )
        ChallengeRole.objects.create(challenge=challenge, user=user, role=role)
        return user

    return make


@pytest.fixture
def rater_user(django_user_model):
    return django_user_model.objects.create_user("rita", password="rater-pass-1")


@pytest.fixture
def challenge(db):
    from stimuli.services import create_challenge

    return create_challenge(name="Foley 2023", slug="foley-2023")


@pytest.fixture
def organizer_client(client, organizer):
    client.force_login(organizer)
    return client


@pytest.fixture
def api_client(organizer):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    token, _ = Token.objects.get_or_create(user=organizer)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def _database_url() -> str:
    cfg = connection.settings_dict
    user = cfg.get("USER") or "postgres"
    password = f":{cfg['PASSWORD']}" if cfg.get("PASSWORD") else ""
    host = cfg.get("HOST") or "127.0.0.1"
    port = cfg.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{cfg['NAME']}"


class WorkerProcess:
    """A `celery worker` subprocess on the test database and a private Redis key prefix."""

    def __init__(self, env: dict[str, str], log_path: Path, queues: str = "cpu,gpu"):
        self.env = env
        self.log_path = log_path
        self.queues = queues
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> None:
        name = f"test-{uuid.uuid4().hex[:8]}@{socket.gethostname()}"
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "foley_platform",
                "worker",
                "-Q",
                self.queues,
                "-c",
                "1",
                "-n",
                name,
                "-l",
                "info",
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited early:\n{self.log()}")
            if " ready." in self.log():
                return
            time.sleep(0.2)
        raise RuntimeError(f"celery worker not ready after {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the worker and its pool children, as a crashed machine would."""
        if self.proc and self.proc.poll() is None:
            subprocess.run(["pkill", "-KILL", "-P", str(self.proc.pid)], check=False)
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


def _reset_broker_connections(app) -> None:
    """Drop cached broker connections so the next task is sent with the current settings."""
    from kombu import pools

    pools.reset()  # kombu keeps producer pools per connection in a process-wide registry
    if app._pool is not None:
        app._pool.force_close_all()
        app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def celery_worker(transactional_db, settings, tmp_path):
    """Start a real Celery worker process and send this process's tasks to it through Redis.

    Tests using it see committed data only (transactional_db), and wait on job rows.
    """
    from foley_platform.celery import app

    prefix = f"foley-test-{uuid.uuid4().hex[:10]}:"
    options = {"visibility_timeout": 5, "global_keyprefix": prefix}
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": REDIS_URL,
        "CELERY_KEY_PREFIX": prefix,
        "CELERY_VISIBILITY_TIMEOUT": "5",
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    old = {k: app.conf[k] for k in ("broker_url", "task_always_eager", "broker_transport_options")}
    app.conf.update(broker_url=REDIS_URL, task_always_eager=False, broker_transport_options=options)
    _reset_broker_connections(app)
    worker = WorkerProcess(env, tmp_path / "worker.log")
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()
        app.conf.update(old)
        _reset_broker_connections(app)
        try:
            import redis

            client = redis.Redis.from_url(REDIS_URL)
            keys = list(client.scan_iter(f"{prefix}*"))
            if keys:
                client.delete(*keys)
        except Exception:
            pass


def wait_until(check, what: str, timeout: float = 60):
    """Poll `check()` until it returns something true, and return that: a state other
    processes reach (a worker's job, nginx's report of a sent file)."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached in {timeout} s")
        time.sleep(0.1)


def wait_for_job(job_id: int, timeout: float = 120):
    """Poll a job row until it finishes, as the pages do."""
    from stimuli.models import Job

    def finished():
        job = Job.objects.get(pk=job_id)
        return job if job.is_finished else None

    try:
        return wait_until(finished, f"job {job_id} finished", timeout)
    except AssertionError:
        job = Job.objects.get(pk=job_id)
        raise AssertionError(
            f"job {job_id} did not finish in {timeout} s: {job.state} {job.message}"
        ) from None


@pytest.fixture
def held_plots(monkeypatch):
    """Drawing the plots waits for `release`: the job stays at that step while the test looks."""
    import threading

    from scoring import plots

    drawing, release = threading.Event(), threading.Event()
    real = plots.render

    def held(*args, **kwargs):
        drawing.set()
        assert release.wait(60), "the test never let the plots be drawn"
        return real(*args, **kwargs)

    monkeypatch.setattr(plots, "render", held)
    yield drawing, release
    release.set()
    join_job_threads()


def join_job_threads(timeout: float = 60) -> None:
    """Wait for the jobs' threads to end (their last write and closing their connection)
    before the test's database goes."""
    import threading

    for thread in threading.enumerate():
        if thread.name.startswith("job-"):
            thread.join(timeout)
            assert not thread.is_alive(), f"{thread.name} still runs"


@pytest.fixture
def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        if REQUIRE_SERVICES:
            pytest.fail("chromium is not installed", pytrace=False)
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


@pytest.fixture(scope="session")
def dcase_stats_dir() -> Path:
    """The official DCASE 2023 Task 7 evaluation-set VGGish statistics: seven .npz files."""
    if len(list(DCASE_STATS.glob("*.npz"))) == 7:
        return DCASE_STATS
    reason = (
        f"the DCASE 2023 Task 7 statistics are not in {DCASE_STATS} (set FOLEY_DCASE_STATS to "
        "a folder of <category>.npz files with mu and sigma)"
    )
    if REQUIRE_SERVICES:
        pytest.fail(f"FOLEY_REQUIRE_SERVICES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, whose connections from other processes are ended before
    it is dropped: a worker or server process the tests killed may still hold one for a moment
    (its server process has not yet seen it gone), which would leave the database behind with a
    warning."""
    yield
    with django_db_blocker.unblock():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
