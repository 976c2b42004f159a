"""The review window freezes everything but code: each way a fix smuggled new model data in is
refused naming the file, the organizers' diff lists the same change by size and sha256, and a
code-only fix is still accepted.

Checks are queued on a broker no worker reads; a version that must count is marked valid, as
the worker would have."""

from __future__ import annotations

import datetime as dt
import gzip
import io
import json
import random
import re
import zipfile

import pytest
from django.urls import reverse
from django.utils import timezone

from stimuli.errors import Refused
from stimuli.models import Team
from stimuli.submissions import schedule
from stimuli.submissions.models import Submission
from stimuli.submissions.review import CodeRule, fix_problems
from stimuli.submissions.services import archive_manifest, submit

from .conftest import baseline_archive, meta, upload

pytestmark = pytest.mark.django_db

PACKAGE = "foley_baseline"
MB = 1_200_000  # the attack's 1.2 MB: over the 1 MiB the old rule called weights, by a little


def _bytes(seed: int, n: int) -> bytes:
    return random.Random(seed).randbytes(n)


def _py_blob(seed: int, n: int = MB) -> bytes:
    """A module whose one literal is a model's weights: valid UTF-8 source."""
    return b"WEIGHTS = " + repr(_bytes(seed, n)).encode()[: n - 10] + b"\n"


def _txt(seed: int, n: int = MB) -> bytes:
    rng = random.Random(seed)
    out = io.StringIO()
    while out.tell() < n:
        out.write(f"{rng.uniform(-1, 1):.6f}\n")
    return out.getvalue().encode()


def _json(seed: int, n: int = MB) -> bytes:
    """A layer's weights as a JSON list of floats, of at least `n` bytes."""
    rng = random.Random(seed)
    return json.dumps([round(rng.uniform(-1, 1), 6) for _ in range(n // 9)]).encode()


def _zip(seed: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("inner.npy", _bytes(seed, 200_000))
    return buffer.getvalue()


def _generator_json(model_path: str) -> bytes:
    return json.dumps({"module": PACKAGE, "model_path": model_path}).encode()


def archive(extra: dict[str, bytes] | None = None, drop=(), code_suffix: str = "") -> bytes:
    """The baseline archive with files added, replaced or dropped."""
    with zipfile.ZipFile(io.BytesIO(baseline_archive(code_suffix=code_suffix))) as zf:
        files = {info.filename: zf.read(info) for info in zf.infolist()}
    for name in drop:
        files.pop(name)
    files.update(extra or {})
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buffer.getvalue()


@pytest.fixture
def barkers(make_member):
    user = make_member("Barkers", "ann")
    return user, Team.objects.get(name="Barkers")


def _counts(submission: Submission) -> Submission:
    """The worker found it valid and the team made it count."""
    Submission.objects.filter(system=submission.system, chosen=True).update(chosen=False)
    Submission.objects.filter(pk=submission.pk).update(state=Submission.State.VALID, chosen=True)
    submission.refresh_from_db()
    return submission


def _into_review(challenge) -> None:
    schedule.set_schedule(
        challenge, submission_deadline=timezone.now() - dt.timedelta(hours=1), review_days=4
    )


# Each bypass: the frozen version's extra files, the fix's, and the file the refusal names.
BYPASSES = {
    "weights in a 1.2 MB .py": (
        {}, {f"{PACKAGE}/weights_blob.py": _py_blob(1)}, f"{PACKAGE}/weights_blob.py",
    ),
    "other weights in the same 1.2 MB module": (
        {f"{PACKAGE}/weights_blob.py": _py_blob(1)},
        {f"{PACKAGE}/weights_blob.py": _py_blob(2)},
        f"{PACKAGE}/weights_blob.py",
    ),
    "a 1.2 MB .txt": (
        {f"{PACKAGE}/weights.txt": _txt(1)}, {f"{PACKAGE}/weights.txt": _txt(2)},
        f"{PACKAGE}/weights.txt",
    ),
    "a 1.2 MB .dat": (
        {f"{PACKAGE}/model.dat": _bytes(1, MB)}, {f"{PACKAGE}/model.dat": _bytes(2, MB)},
        f"{PACKAGE}/model.dat",
    ),
    "a 1.2 MB .json": (
        {f"{PACKAGE}/layers.json": _json(1)}, {f"{PACKAGE}/layers.json": _json(2)},
        f"{PACKAGE}/layers.json",
    ),
    "a .dat under 1 MiB": (
        {f"{PACKAGE}/model.dat": _bytes(1, 500_000)}, {f"{PACKAGE}/model.dat": _bytes(2, 500_000)},
        f"{PACKAGE}/model.dat",
    ),
    "a .json under 1 MiB": (
        {f"{PACKAGE}/layers.json": json.dumps(list(range(50_000))).encode()},
        {f"{PACKAGE}/layers.json": json.dumps(list(range(1, 50_001))).encode()},
        f"{PACKAGE}/layers.json",
    ),
    "a nested .zip": ({}, {f"{PACKAGE}/more.zip": _zip(2)}, f"{PACKAGE}/more.zip"),
    "a .gz": (
        {f"{PACKAGE}/w.gz": gzip.compress(_bytes(1, 300_000))},
        {f"{PACKAGE}/w.gz": gzip.compress(_bytes(2, 300_000))},
        f"{PACKAGE}/w.gz",
    ),
    "foley-generator.json pointing elsewhere": (
        {"foley-generator.json": _generator_json(PACKAGE), "other/weights.npy": _bytes(3, 1000)},
        {"foley-generator.json": _generator_json("other"), "other/weights.npy": _bytes(3, 1000)},
        "foley-generator.json",
    ),
    "binary bytes in a small .py": (
        {}, {f"{PACKAGE}/tables.py": _bytes(4, 10_000)}, f"{PACKAGE}/tables.py",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BYPASSES))
def test_each_bypass_is_refused_naming_the_file_and_shown_in_the_diff(
    case, open_challenge, barkers, organizer_client, queued_only
):
    frozen_files, fix_files, named = BYPASSES[case]
    user, team = barkers
    frozen = submit(team, user, meta(), upload(archive(frozen_files)))
    # Before the deadline the same change is a new version; the organizers' diff shows it.
    changed = submit(team, user, meta(), upload(archive(fix_files)))
    page = organizer_client.get(
        reverse("submissions_organize:diff", args=["teams", changed.pk])
    ).content.decode()
    assert f'data-file="{named}"' in page and "byte-identical" not in page
    row = re.search(rf'<tr data-file="{re.escape(named)}".*?</tr>', page, re.S).group()
    assert '<span class="bad">model data</span>' in row
    entry = changed.manifest[named]
    assert entry["sha256"] in page and f"{entry['size']:,} bytes" in page
    if named in frozen.manifest:
        assert frozen.manifest[named]["sha256"] in page
    # In the review window it is refused, naming the file; nothing is stored.
    _counts(frozen)
    _into_review(open_challenge)
    before = Submission.objects.count()
    with pytest.raises(Refused) as refused:
        submit(team, user, meta(), upload(archive(fix_files)))
    assert refused.value.status == 409
    assert any(p.startswith(f"In the review window only code may change: {named} ")
               for p in refused.value.problems), refused.value.problems  # fmt: skip
    assert Submission.objects.count() == before


def test_a_code_only_fix_is_accepted_and_the_diff_says_byte_identical(
    open_challenge, barkers, organizer_client, queued_only
):
    user, team = barkers
    frozen = _counts(submit(team, user, meta(), upload(archive({"README.md": b"# Barker\n"}))))
    _into_review(open_challenge)
    fix = submit(
        team, user, meta(),
        upload(archive({"README.md": b"# Barker, fixed\n", f"{PACKAGE}/helpers.py": b"X = 1\n"},
                       code_suffix="\nFIXED = True\n")),
    )  # fmt: skip
    assert fix.in_review and fix.review_base == frozen
    page = organizer_client.get(
        reverse("submissions_organize:diff", args=["teams", fix.pk])
    ).content.decode()
    assert 'Model data (every file that is not code): <span class="ok">byte-identical' in page
    assert "+FIXED = True" in page and f'data-file="{PACKAGE}/helpers.py"' in page
    assert 'data-change="added"' in page and "3 files changed" in page


def test_a_fix_naming_every_problem_at_once(open_challenge, barkers, queued_only):
    user, team = barkers
    _counts(submit(team, user, meta(), upload(archive({f"{PACKAGE}/weights.txt": _txt(1)}))))
    _into_review(open_challenge)
    bad = archive(
        {f"{PACKAGE}/weights.txt": _txt(2), f"{PACKAGE}/model.dat": _bytes(1, 1000),
         f"{PACKAGE}/weights_blob.py": _py_blob(1)},
        drop=[f"{PACKAGE}/weights.npy"],
    )  # fmt: skip
    with pytest.raises(Refused) as refused:
        submit(team, user, meta(config={"checkpoint": "b"}), upload(bad))
    text = refused.value.message
    for named in (f"{PACKAGE}/weights.txt changed", f"{PACKAGE}/model.dat was added",
                  f"{PACKAGE}/weights_blob.py was added", f"{PACKAGE}/weights.npy was removed",
                  "declared settings changed: checkpoint"):  # fmt: skip
        assert named in text
    assert len(refused.value.problems) == 5


def test_a_renamed_weights_file_is_refused_naming_both_names(open_challenge, barkers, queued_only):
    user, team = barkers
    _counts(submit(team, user, meta(), upload(archive())))
    _into_review(open_challenge)
    with zipfile.ZipFile(io.BytesIO(baseline_archive())) as zf:
        weights = zf.read(f"{PACKAGE}/weights.npy")
    moved = archive({f"{PACKAGE}/w2.npy": weights}, drop=[f"{PACKAGE}/weights.npy"])
    with pytest.raises(Refused) as refused:
        submit(team, user, meta(), upload(moved))
    assert refused.value.problems == [
        f"In the review window only code may change: {PACKAGE}/weights.npy was renamed to "
        f"{PACKAGE}/w2.npy (model data: .npy is not a code suffix)"
    ]


def test_weights_split_across_small_modules_stop_at_the_fix_cap_over_several_fixes(
    open_challenge, barkers, queued_only
):
    """Fixes are compared with the frozen version, not with each other: 200 KB of code per
    fix is fine once, twice, not a third time (512 KiB in all by default)."""
    user, team = barkers
    schedule.set_schedule(open_challenge, submissions_per_day=10)
    frozen = _counts(submit(team, user, meta(), upload(archive())))
    _into_review(open_challenge)
    parts: dict[str, bytes] = {}
    for i in range(2):
        parts[f"{PACKAGE}/part{i}.py"] = _py_blob(10 + i, 200_000)
        fix = _counts(submit(team, user, meta(), upload(archive(parts))))
        assert fix.review_base == frozen
    parts[f"{PACKAGE}/part2.py"] = _py_blob(12, 200_000)
    with pytest.raises(Refused, match=r"adds or changes 600,\d+ bytes of code since the frozen "
                       r"version; the cap is 524,288"):  # fmt: skip
        submit(team, user, meta(), upload(archive(parts)))


def test_the_rule_is_the_challenges(open_challenge, barkers, queued_only):
    """An organizer may name .txt as code and raise the cap; the rule applies as set."""
    user, team = barkers
    _counts(submit(team, user, meta(), upload(archive({f"{PACKAGE}/notes.txt": b"a\n"}))))
    _into_review(open_challenge)
    changed = archive({f"{PACKAGE}/notes.txt": b"b\n"})
    with pytest.raises(Refused, match=r"notes\.txt changed \(model data: \.txt is not a code"):
        submit(team, user, meta(), upload(changed))
    schedule.set_schedule(open_challenge, review_code_suffixes=".py .txt")
    assert submit(team, user, meta(), upload(changed)).in_review
    with pytest.raises(Refused) as refused:
        schedule.set_schedule(
            open_challenge, review_code_suffixes="py, .TXT", review_file_max_bytes=0
        )
    assert {p.split(":")[0] for p in refused.value.problems} == {
        "review_code_suffixes", "review_file_max_bytes"
    }  # fmt: skip


def test_the_rule_holds_in_the_database(open_challenge):
    from django.db import IntegrityError, transaction

    from stimuli.submissions.models import ChallengeSchedule

    found = ChallengeSchedule.objects.get(challenge=open_challenge)
    for field, value in (("review_code_suffixes", "py txt"), ("review_file_max_bytes", 0)):
        with pytest.raises(IntegrityError), transaction.atomic():
            ChallengeSchedule.objects.filter(pk=found.pk).update(**{field: value})


def test_the_manifest_hashes_every_file_and_knows_text(tmp_path):
    data = archive({"a.py": "é = 1\n".encode(), "b.py": b"\xff\xfe", "c.py": b"x\x00y"})
    path = tmp_path / "a.zip"
    path.write_bytes(data)
    manifest = archive_manifest(path)
    assert set(manifest) >= {"a.py", "b.py", "c.py", f"{PACKAGE}/weights.npy"}
    assert manifest["a.py"]["text"] and not manifest["b.py"]["text"]
    assert not manifest["c.py"]["text"]  # a NUL byte is not source


def test_a_member_stored_twice_is_refused(tmp_path):
    path = tmp_path / "twice.zip"
    with zipfile.ZipFile(path, "w") as zf, pytest.warns(UserWarning, match="Duplicate name"):
        zf.writestr("m/weights.npy", b"a")
        zf.writestr("m/./weights.npy", b"b")
        zf.writestr("m/weights.npy", b"c")
    with pytest.raises(Refused) as refused:
        archive_manifest(path)
    assert len(refused.value.problems) == 2


def test_fix_problems_by_content_not_by_name():
    """The rule alone: a code file may change, be added or removed; a file of the frozen version
    that was not code may not, even to become code."""
    rule = CodeRule()

    def entry(sha: str, size: int = 10, text: bool = True) -> dict:
        return {"sha256": sha * 64, "size": size, "text": text}

    frozen = {"m/a.py": entry("a"), "m/b.py": entry("b"), "m/data.txt": entry("c")}
    fix = {"m/a.py": entry("d"), "m/new.py": entry("e"), "m/data.txt": entry("c")}
    assert fix_problems(frozen, fix, rule) == []
    wheel = {"m-1.0.dist-info/RECORD": entry("h"), "m-1.0.dist-info/blob.npy": entry("i")}
    rebuilt = {"m-1.0.dist-info/RECORD": entry("j"), "m-1.0.dist-info/blob.npy": entry("k")}
    assert [p.split(": ")[1].split(" (")[0] for p in fix_problems(wheel, rebuilt, rule)] == [
        "m-1.0.dist-info/blob.npy changed"  # the wheel's RECORD may follow the fix; not data
    ]
    fix = {**frozen, "m/data.txt": entry("f")}
    assert fix_problems(frozen, fix, rule)[0].startswith(
        "In the review window only code may change: m/data.txt changed (model data: .txt"
    )
    big = {**frozen, "m/a.py": entry("g", size=rule.file_max_bytes + 1)}
    assert "over the cap of 262,144 per code file" in fix_problems(frozen, big, rule)[0]
    assert fix_problems(frozen, {**frozen, "M/A.PY": entry("a", text=False)}, rule) == [
        "In the review window only code may change: M/A.PY was added and is not code (not "
        f"UTF-8 text); 10 bytes, sha256 {'a' * 12}…"
    ]


def test_the_generated_audio_is_frozen_too(open_challenge, barkers, queued_only):
    schedule.set_schedule(open_challenge, audio_allowed=True)
    user, team = barkers
    audio = archive({"dog_bark/1.wav": b"RIFF one"})
    _counts(submit(team, user, meta(), upload(archive()), upload(audio, "audio.zip")))
    _into_review(open_challenge)
    fix = archive(code_suffix="\n# fixed\n")
    other = archive({"dog_bark/1.wav": b"RIFF two"})
    for attached in (None, upload(other, "audio.zip")):
        with pytest.raises(Refused, match="the generated audio differs from the frozen version"):
            submit(team, user, meta(), upload(fix), attached)
    assert submit(team, user, meta(), upload(fix), upload(audio, "audio.zip")).in_review


def test_the_team_page_in_review_states_the_rules_and_starts_from_the_frozen_settings(
    open_challenge, barkers, queued_only, client
):
    """A code-only fix is refused when the form's settings differ from the frozen version's:
    in the window the form starts from them, the page says what the window allows and when it
    ends, and the version page shows the declared settings."""
    user, team = barkers
    frozen = _counts(
        submit(
            team, user, meta(description="A barker", config={"brightness": 0.25}),
            upload(archive({"README.md": b"# Barker\n"})),
        )
    )  # fmt: skip
    client.force_login(user)
    page = client.get(reverse("teams:team", args=["teams"])).content.decode()
    assert 'id="review-rules"' not in page  # development: the form starts empty
    _into_review(open_challenge)
    page = client.get(reverse("teams:team", args=["teams"])).content.decode()
    assert 'id="review-rules"' in page and "code fixes only" in page and "until" in page
    assert f"{frozen.system.name} v{frozen.version}, the version a fix is compared with" in page
    assert 'value="Barker"' in page and "A barker</textarea>" in page
    assert "{&quot;brightness&quot;: 0.25}" in page
    # What the form holds, submitted with a fixed archive, is accepted as a fix.
    fix = submit(
        team, user, meta(description="A barker", config={"brightness": 0.25}),
        upload(archive({"README.md": b"# Barker, fixed\n"})),
    )  # fmt: skip
    assert fix.in_review and fix.review_base == frozen
    version = client.get(reverse("teams:submission", args=["teams", frozen.pk])).content.decode()
    assert 'id="declared-settings"' in version and "{&quot;brightness&quot;: 0.25}" in version
