"""A generator archive of real size through the production proxy (deploy/nginx.conf, run for
real on loopback in front of the live server): a 200 MB generator posted by a team's CI or its
page passes nginx, which buffers it to a temporary file, never whole into memory, and is accepted
by Django as a new version; one Django's own checks refuse is refused for its content, not its
size; a body over the platform's limit gets nginx's 413 before a byte of it is read."""

from __future__ import annotations

import hashlib
import io
import resource
import socket
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings as django_settings
from django.core.files.storage import default_storage
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token

from foley_platform.limits import body_limit
from stimuli.submissions.baseline_archive import PACKAGE, baseline_archive
from stimuli.submissions.models import Submission
from tests.nginx_site import nginx_binary, start_nginx, stop_nginx

pytestmark = pytest.mark.django_db(transaction=True)

ARCHIVE_BYTES = 200 * 1000 * 1000
CHUNK = 1024 * 1024
BOUNDARY = "foley-archive-boundary"
# The most a 200 MB upload may add to a process's peak memory: the body is streamed, so this is
# far below the body's size (it leaves room for the interpreter's own churn).
MEMORY_ROOM = 64 * 1024 * 1024


@pytest.fixture
def proxied(live_server, tmp_path, settings):
    """deploy/nginx.conf in front of the live server: (base URL, nginx's folder, its PID)."""
    if not nginx_binary():
        pytest.skip("nginx is not installed")
    settings.SESSION_COOKIE_SECURE = False  # plain HTTP on loopback: no TLS proxy here
    settings.CSRF_COOKIE_SECURE = False
    static = tmp_path / "static"
    static.mkdir()
    folder = tmp_path / "nginx"
    upstream = live_server.url.split("//", 1)[1]
    process, url = start_nginx(upstream, django_settings.MEDIA_ROOT, static, folder)
    try:
        yield url, folder, process.pid
    finally:
        stop_nginx(process)


def _write_zeros(member, size: int) -> None:
    piece = bytes(CHUNK)
    left = size
    while left > 0:
        member.write(piece[: min(left, CHUNK)])
        left -= CHUNK


def archive_of_zeros(path: Path, size: int) -> Path:
    """A zip holding one stored file of `size` zero bytes, written a piece at a time."""
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive,
        archive.open("weights.bin", "w") as member,
    ):
        _write_zeros(member, size)
    return path


WEIGHTS = f"{PACKAGE}/weights.npy"


def generator_of(path: Path, size: int) -> Path:
    """The baseline generator with a weights file of `size` bytes, written a piece at a time:
    an archive the platform accepts."""
    with (
        zipfile.ZipFile(io.BytesIO(baseline_archive())) as small,
        zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive,
    ):
        for info in small.infolist():
            if info.filename != WEIGHTS:
                archive.writestr(info.filename, small.read(info))
        with archive.open(WEIGHTS, "w") as member:
            _write_zeros(member, size)
    return path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while piece := source.read(CHUNK):
            digest.update(piece)
    return digest.hexdigest()


def multipart(fields: dict[str, str], archive: Path) -> tuple[int, Iterator[bytes]]:
    """A multipart form of `fields` and the archive as `archive`: its length, and its bytes as
    pieces read from the file as they are sent."""
    head = "".join(
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        for name, value in fields.items()
    )
    head += (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="archive"; '
        'filename="system.zip"\r\nContent-Type: application/zip\r\n\r\n'
    )
    start, end = head.encode(), f"\r\n--{BOUNDARY}--\r\n".encode()

    def pieces() -> Iterator[bytes]:
        yield start
        with archive.open("rb") as source:
            while piece := source.read(CHUNK):
                yield piece
        yield end

    return len(start) + archive.stat().st_size + len(end), pieces()


def peak_memory_of(pid: int) -> int:
    """A process's peak resident memory in bytes (Linux's VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def nginx_workers(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [int(pid) for pid in children]


FIELDS = {"system": "Large system", "track": "A", "licence": "MIT"}


def _post_archive(
    url: str, path: str, archive: Path, headers: dict, fields: dict
) -> httpx.Response:
    length, body = multipart(fields, archive)
    with httpx.Client(timeout=300) as http:
        return http.post(
            url + path,
            content=body,
            headers={
                **headers,
                "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
                "Content-Length": str(length),
            },
        )


def _posts(slug: str, user) -> list[tuple[str, dict, dict]]:
    """The team's CI API with its token, and the team's page as a browser posts it (the
    session's cookie and the form's CSRF token): (path, headers, form fields)."""
    token = Token.objects.get_or_create(user=user)[0].key
    page = Client()
    page.force_login(user)
    csrf = "c" * 32
    cookies = f"{django_settings.SESSION_COOKIE_NAME}={page.cookies['sessionid'].value}; "
    cookies += f"{django_settings.CSRF_COOKIE_NAME}={csrf}"
    return [
        (f"/api/challenges/{slug}/submissions/", {"Authorization": f"Token {token}"}, FIELDS),
        (
            f"/teams/{slug}/team/submit/",
            {"Cookie": cookies},
            {**FIELDS, "csrfmiddlewaretoken": csrf},
        ),
    ]


def _buffered_not_held(folder: Path, master: int, before: int) -> None:
    """nginx kept the body in a temporary file, not in its memory, and so did the web process;
    what nginx wrote to its temporary folder is gone once the request is over."""
    log = (folder / "error.log").read_text()
    assert "a client request body is buffered to a temporary file" in log
    workers = nginx_workers(master)
    assert workers and max(peak_memory_of(pid) for pid in workers) < MEMORY_ROOM
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    print(
        f"peak memory: nginx {max(map(peak_memory_of, workers)) >> 20} MiB, web +{grew >> 20} MiB"
    )
    assert grew < MEMORY_ROOM
    assert [p for p in (folder / "body").rglob("*") if p.is_file()] == []


def test_a_200_mb_generator_is_accepted_through_the_proxy(
    proxied, make_member, open_challenge, queued_only, media_root, tmp_path
):
    url, folder, master = proxied
    ann = make_member("Team A", "ann")
    archive = generator_of(tmp_path / "system.zip", ARCHIVE_BYTES)
    size, sha = archive.stat().st_size, sha256_of(archive)
    assert size > 50 * django_settings.FOLEY_BODY_MAX_BYTES  # far past the small-body limit
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    (api, token, api_fields), (page, cookies, page_fields) = _posts(open_challenge.slug, ann)
    started = time.monotonic()
    response = _post_archive(url, api, archive, token, api_fields)
    print(f"{api}: 200 MB through nginx, accepted in {time.monotonic() - started:.1f} s")
    assert response.status_code == 201, (response.status_code, response.text[:500])
    accepted = response.json()
    assert (accepted["system"], accepted["version"]) == (FIELDS["system"], 1)
    assert (accepted["archive_bytes"], accepted["archive_sha256"]) == (size, sha)
    started = time.monotonic()
    response = _post_archive(url, page, archive, cookies, page_fields)
    print(f"{page}: 200 MB through nginx, accepted in {time.monotonic() - started:.1f} s")
    second = Submission.objects.get(system__name=FIELDS["system"], version=2)
    assert response.status_code == 302, (response.status_code, response.text[:500])
    assert response.headers["Location"] == reverse(
        "teams:submission", args=[open_challenge.slug, second.pk]
    )
    # Both versions whole: the stored archive is the one sent, its weights hashed to the byte.
    for version in Submission.objects.filter(system__name=FIELDS["system"]):
        assert (version.archive_bytes, version.archive_sha256) == (size, sha)
        assert version.manifest[WEIGHTS]["size"] == ARCHIVE_BYTES
        assert default_storage.size(version.archive) == size
    _buffered_not_held(folder, master, before)
    default_storage.delete(second.archive)  # one file for both versions: same content
    archive.unlink()


def test_a_200_mb_archive_refused_for_its_content_not_its_size(
    proxied, make_member, open_challenge, tmp_path
):
    url, folder, master = proxied
    ann = make_member("Team A", "ann")
    archive = archive_of_zeros(tmp_path / "system.zip", ARCHIVE_BYTES)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    for path, headers, fields in _posts(open_challenge.slug, ann):
        started = time.monotonic()
        response = _post_archive(url, path, archive, headers, fields)
        took = time.monotonic() - started
        # Not nginx's 413: Django read the archive and refused it for what is in it (a file of
        # zeros is no generator), naming the archive.
        assert response.status_code == 400, (path, response.status_code, response.text[:500])
        assert "archive: the archive must hold exactly one top-level module" in response.text
        print(f"{path}: 200 MB through nginx to Django's refusal in {took:.1f} s")
    assert not Submission.objects.exists()
    _buffered_not_held(folder, master, before)


def _declared(url: str, path: str, length: int) -> int:
    """The status nginx answers to a POST that declares `length` bytes and sends none of them."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {length}\r\n"
            f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n\r\n".encode()
        )
        status = b""
        while b"\r\n" not in status:
            piece = sock.recv(1024)
            if not piece:
                break
            status += piece
    return int(status.split(b" ", 2)[1])


def test_an_archive_over_the_limit_gets_nginx_413_before_it_is_sent(proxied, open_challenge):
    url, folder, _ = proxied
    limit = body_limit("team-submission-list")
    assert limit == body_limit("teams:submit") == django_settings.FOLEY_GENERATOR_MAX_BYTES + 2**20
    for path in (
        f"/api/challenges/{open_challenge.slug}/submissions/",
        f"/teams/{open_challenge.slug}/team/submit/",
    ):
        assert _declared(url, path, limit + 1) == 413, path
    assert [p for p in (folder / "body").rglob("*") if p.is_file()] == []


def test_a_challenges_archive_limit_is_at_most_the_sites(open_challenge, settings):
    from stimuli.errors import Refused
    from stimuli.submissions import schedule

    settings.FOLEY_GENERATOR_MAX_BYTES = 10 * 1024**2
    with pytest.raises(Refused) as refused:
        schedule.set_schedule(open_challenge, archive_max_bytes=10 * 1024**2 + 1)
    assert "archive_max_bytes: at most 10,485,760 bytes" in str(refused.value.problems)
    assert schedule.set_schedule(open_challenge, archive_max_bytes=10 * 1024**2)
