"""What a browser, or a bot posing as one, sends to a rater's pages: plain HTTP on loopback."""

from __future__ import annotations

import io
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx
import numpy as np
import soundfile

from raters import delivery, demo, enrolment, selectors, sessions
from raters.models import Rater
from stimuli.models import Clip, System
from tests.listening_setup import rater_at_trials

TOKEN = re.compile(r'name="token" value="([^"]+)"')
KEY = re.compile(r'name="key" value="([^"]+)"')
PRELOAD = re.compile(r'<audio preload="auto" src="[^"]*/audio/([^/"]+)/" hidden')
EXAMPLE = re.compile(r'data-token="([^"]+)"')
SESSION = re.compile(r'name="session" value="(\d+)"')


class Browser:
    """One rater's browser: its cookies, the pages it reads and the requests it makes."""

    def __init__(self, base: str, slug: str, address: str = "") -> None:
        self.base, self.slug = base, slug
        # From `address` where given: any of loopback's 127.0.0.0/8 is this machine, so a farm
        # of many networks is a range of source addresses.
        transport = httpx.HTTPTransport(local_address=address) if address else None
        self.http = httpx.Client(
            base_url=base, follow_redirects=False, timeout=120, transport=transport
        )

    def close(self) -> None:
        self.http.close()

    def path(self, rest: str) -> str:
        return f"/listen/{self.slug}/{rest}"

    def join(self, key: str) -> None:
        assert self.http.get(self.path(f"join/{key}/")).status_code == 302
        self.http.get(self.path(""))  # the CSRF cookie

    def crowd(self, key: str, participant: str) -> httpx.Response:
        return self.http.get(self.path(f"crowd/{key}/"), params={"PROLIFIC_PID": participant})

    @property
    def csrf(self) -> str:
        return self.http.cookies.get("csrftoken", "")

    def post(self, rest: str, data: dict) -> httpx.Response:
        return self.http.post(self.path(rest), data=data, headers={"X-CSRFToken": self.csrf})

    def page(self) -> str:
        response = self.http.get(self.path(""))
        assert response.status_code == 200, response.text[:500]
        return response.text

    def trial(self) -> dict:
        """The trial page's form: token, request key, and the preloaded next sound's token."""
        page = self.page()
        token, key = TOKEN.search(page), KEY.search(page)
        assert token and key, page[:2000]
        following = PRELOAD.search(page)
        return {
            "token": token.group(1),
            "key": key.group(1),
            "next": following.group(1) if following else None,
        }

    def examples(self) -> tuple[int, list[str]]:
        page = self.page()
        return int(SESSION.search(page).group(1)), EXAMPLE.findall(page)

    def sound(self, token: str, **headers) -> httpx.Response:
        """GET a sound and read all of it, as a player does."""
        return self.http.get(self.path(f"audio/{token}/"), headers=headers)

    def event(self, token: str, kind: str, t: float, **extra) -> dict:
        response = self.http.post(
            self.path("player/"),
            content=json.dumps({"token": token, "event": kind, "t": t, **extra}),
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json",
                "X-CSRFToken": self.csrf,
            },
        )
        assert response.status_code == 200, response.text
        return response.json()

    def rate(self, form: dict, quality: int = 7, fit: int = 7) -> httpx.Response:
        return self.post(
            "rate/",
            {"token": form["token"], "key": form["key"], "quality": quality, "fit": fit},
        )

    def listen(self, token: str, duration: float) -> dict:
        """An honest player: fetch the sound whole, play it in real time with a checkpoint
        every two seconds (as the page's script does), and report its end. Its waiting is the
        listening, not a wait for the server."""
        assert self.sound(token).status_code == 200
        self.event(token, "play", 0.0)
        # Timed from the server's answer: on a loaded machine the event may wait its turn, and
        # the server times the listening from when it took the event.
        began = time.monotonic()
        while (played := time.monotonic() - began) < duration:
            time.sleep(min(2.0, duration - played))
            if (played := time.monotonic() - began) < duration - 0.5:
                self.event(token, "timeupdate", played)
        return self.event(token, "ended", duration)

    def abandon(self, token: str, keep: int = 30) -> None:
        """Ask for a sound on a connection with a small receive buffer, read `keep` bytes of
        the answer and hang up."""
        parts = urlsplit(self.base)
        cookies = "; ".join(f"{k}={v}" for k, v in self.http.cookies.items())
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect((parts.hostname, parts.port))
            sock.sendall(
                f"GET {self.path(f'audio/{token}/')} HTTP/1.1\r\nHost: {parts.hostname}\r\n"
                f"Cookie: {cookies}\r\nConnection: close\r\n\r\n".encode()
            )
            got = b""
            while len(got) < keep:
                chunk = sock.recv(keep - len(got))
                if not chunk:
                    break
                got += chunk
            # Unread bytes left behind: closing sends a reset, as a killed download does.
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )


def rater_at_trial(challenge, browser: Browser):
    """An invited rater past its first category's examples, in `browser`: (rater, the trial
    page's form)."""
    rater, _ = rater_at_trials(challenge)
    browser.join(rater.access_key)
    return rater, browser.trial()


def rater_at_examples(challenge, browser: Browser):
    """An invited rater at its first category's examples, in `browser`: (rater, the session's
    id, the examples' tokens)."""
    rater = enrolment.invite(challenge)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    sessions.next_session(rater)
    browser.join(rater.access_key)
    return (rater, *browser.examples())


def farm_address(n: int) -> str:
    """A farm bot's source address, each in a network (/24) of its own."""
    return f"127.{40 + n}.{n}.9"


def is_own(served: bytes, own: list[np.ndarray]) -> bool:
    """Whether a served sound is one of the team's own clips: the team uploaded them, and the
    delivery's loudness alignment and dither leave them correlated near 1 with the original."""
    samples, _ = soundfile.read(io.BytesIO(served), always_2d=True)
    heard = samples[:, 0]
    for clip in own:
        n = min(clip.size, heard.size)
        if np.corrcoef(clip[:n], heard[:n])[0, 1] > 0.9:
            return True
    return False


def run_farm(site: str, browser_at, challenge, bot: Callable, size: int) -> tuple[System, set]:
    """A team's farm of `size` bots over HTTP, each from a network of its own, through the crowd
    link: `bot(browser, crowd key, participant id, the team's clips, errors)` runs one to the end
    of its session. The team is the one whose system of track A the honest raters (the demo's
    true scores) like least. Returns that system and the farm's rater codes."""
    favoured = min(
        System.objects.filter(challenge=challenge, track__code="A"),
        key=lambda s: sum(demo._true_scores(s.name)),
    )
    own = [
        delivery.load_samples(clip.audio)[0][:, 0] for clip in Clip.objects.filter(system=favoured)
    ]
    key = selectors.listening_test(challenge).crowd_key
    errors: list = []
    bots = [
        threading.Thread(
            target=bot,
            args=(browser_at(site, challenge.slug, farm_address(n)), key, f"farm{n}", own, errors),
        )
        for n in range(size)
    ]
    for thread in bots:
        thread.start()
    for thread in bots:
        thread.join(600)
    assert not errors, errors
    farm = set(
        Rater.objects.filter(challenge=challenge, participant_id__startswith="farm").values_list(
            "code", flat=True
        )
    )
    assert len(farm) == size
    return favoured, farm
