"""CONTRIBUTING.md's checklists, held: each kind of extension done the way the guide says, in the
files it names and no others, works; and every file the guide names exists."""

from __future__ import annotations

import re
from typing import TypedDict

import numpy as np
import pytest

from tests import ROOT_DIR

GUIDE = ROOT_DIR / "CONTRIBUTING.md"


def checklist(title: str) -> str:
    """The text of one checklist of the guide, by its heading."""
    text = GUIDE.read_text()
    match = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^### |\Z)", text, flags=re.S | re.M)
    assert match, f"no checklist '{title}' in CONTRIBUTING.md"
    return match.group(1)


def test_every_file_the_guide_names_exists():
    names = set(re.findall(r"`((?:stimuli|raters|scoring|foley_platform|tests|docs)/[\w./]+)`",
                           GUIDE.read_text()))  # fmt: skip
    assert len(names) > 10
    assert sorted(n for n in names if not (ROOT_DIR / n).exists()) == []


# --- a new kind of background job -----------------------------------------------------------------


class ToyResult(TypedDict):
    echoed: str


def run_toy(job_id: int):
    """The function the toy kind's task calls, as a stage's services module holds it."""
    from stimuli.jobs import Failed, run_job

    def work(job, progress):
        word = job.params["word"]
        return Failed("no word", {"echoed": ""}) if not word else {"echoed": word}

    return run_job(job_id, work)


@pytest.fixture
def toy_kind():
    """The toy kind, declared as a contributor would in an app's job_kinds.py; taken out of the
    registry afterwards, so that the registry's own tests see only the platform's kinds."""
    from foley_platform.celery import app
    from stimuli import job_kinds

    kind = job_kinds.declare(
        "toy_echo", "Toy echo",
        task="stimuli.tasks.toy_echo", queue="gpu",
        run=f"{__name__}.run_toy", result=ToyResult,
    )  # fmt: skip
    yield kind
    for registry in (job_kinds._KINDS, job_kinds._TASKS):
        registry.pop(kind, None)
    job_kinds._BY_TASK.pop("stimuli.tasks.toy_echo", None)
    app.tasks.pop("stimuli.tasks.toy_echo", None)


@pytest.mark.django_db
def test_a_new_job_kind_needs_only_its_declaration(toy_kind, admin_client):
    from foley_platform.celery import app
    from stimuli.job_kinds import kind_label
    from stimuli.jobs import create_job, enqueue
    from stimuli.models import Job

    steps = checklist("A new kind of background job")
    for named in ("job_kinds.py", "declare(", "services.py", "run_job", "Failed(", "create_job"):
        assert named in steps
    # Its task is made and routed to the declared queue; its label shows; it runs and fails
    # through the typed outcome.
    assert app.amqp.router.route({}, "stimuli.tasks.toy_echo")["queue"].name == "gpu"
    assert kind_label(toy_kind) == "Toy echo"
    job = create_job(toy_kind, params={"word": "hello"})
    enqueue(job)  # in-process here: no broker
    job.refresh_from_db()
    assert (job.state, job.result, job.kind_label) == ("succeeded", {"echoed": "hello"}, "Toy echo")
    failed = create_job(toy_kind, params={"word": ""})
    enqueue(failed)
    failed.refresh_from_db()
    assert (failed.state, failed.error, failed.result) == ("failed", "no word", {"echoed": ""})
    # The admin's filter offers it by its label.
    page = admin_client.get("/admin/stimuli/job/").content.decode()
    assert "Toy echo" in page and Job.objects.filter(kind=toy_kind).count() == 2


# --- a new embedding model ----------------------------------------------------------------------


def test_a_new_embedding_model_needs_only_its_module(monkeypatch):
    """A HEAR module and its name in BUILTIN_MODULES: the objective stage loads and embeds it."""
    from stimuli.objective.embeddings import base

    steps = checklist("A new embedding model")
    for named in ("stimuli/objective/embeddings/", "BUILTIN_MODULES", "docs/objective.md"):
        assert named in steps
    monkeypatch.setitem(base.BUILTIN_MODULES, "toy", "tests.embedding_fixtures.toy")
    model = base.load_embedding_model("toy", {"bands": 4}, device="cpu")
    assert model.spec.is_builtin and model.model_id.startswith("toy:")
    audio = np.random.default_rng(0).standard_normal((2, 16_000)).astype("float32")
    frames = model.embed(audio, 16_000)
    assert frames.shape[0] == 2 and frames.shape[2] == 4 and np.isfinite(frames).all()


def test_every_builtin_model_is_documented_and_tested():
    from stimuli.objective.embeddings import BUILTIN_MODULES

    manual = (ROOT_DIR / "docs" / "objective.md").read_text()
    tests = ROOT_DIR / "tests" / "stimuli" / "objective"
    for name, module in BUILTIN_MODULES.items():
        assert f"`{name}`" in manual, f"{name} is not in docs/objective.md"
        assert (ROOT_DIR / (module.replace(".", "/") + ".py")).is_file(), module
        tested = (tests / f"test_embeddings_{name}.py").is_file() or any(
            f'"{name}"' in path.read_text() for path in tests.glob("test_*.py")
        )
        assert tested, f"no test loads the built-in model {name}"
