"""The listening test at crowd scale: many raters at once against gunicorn and PostgreSQL, as
browsers do it, on loopback.

    python benchmarks/bench_listening_load.py --raters 100 300 1000 --duration 60
    python benchmarks/bench_listening_load.py --nginx --gunicorn "--workers 5"  # sync workers
    python benchmarks/bench_listening_load.py --cost            # queries and time per request

A scratch PostgreSQL database (on the server of DATABASE_URL, default the local one) gets a
challenge whose listening test is open (tests/listening_setup.py: 4 categories, 2 finalists per
track, 4 s sounds at 22.05 kHz, about 176 kB each) and the raters, each with a category begun.
gunicorn (DEBUG=0) is started on it as a child process and stopped by its PID at the end. Each
simulated rater, on its own aiohttp session (its own cookies, at most 6 connections, idle ones
closed after 5 s), loops as a browser does: GET the trial page, fetch its sound with a `Range`
header unless its cache holds it (preloaded by the previous page), preload the next one in the
background, think 5-15 s, POST the answer (and at a category's end: the
break page, the next category, its examples). With `--nginx`, deploy/nginx.conf runs in front
and sends the sounds (X-Accel-Redirect). The server's listening check is set to "the whole file
was delivered" (listened_fraction 0): the player's events are not simulated. With `--listen`
each browser plays its sound to the end (4 s, within its think time) and posts the player's
events as the page does (play, a checkpoint every five seconds, ended: 2 per 4-s sound), and the server
requires 90% of each sound heard before an answer, the DCASE default.

Printed per run: ratings/s in the steady state (from when every rater has arrived and answered
once, two maximum think times, to the end; beside it the rate offered, one answer per mean think
time each), p50/p95/p99 of save, page and audio, errors (HTTP >= 400 and client
time-outs; requests resent once on a kept-alive connection the server had closed, as browsers
do, are counted apart), and the integrity check (answers stored = answers acknowledged, none twice). The
machine's load average and cores are printed at the start and the end: it may be shared. After the table, per run, the load
generator's own CPU (this process, which runs nothing else during the storm: gunicorn and nginx are
child processes) per acknowledged rating and as a share of one core: it runs on the same cores as
the server.

`--timeline FILE` appends every timed request (raters, seconds since the start, kind, ms) as
CSV, to tell a steady tail from a stall or the arrival of the crowd.

`--cost` measures in-process (Django's test client, no gunicorn) the queries and the time of a
trial page and of a save with 100 and with 10,000 sessions in the database (medians).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import secrets
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.server_stack import site_environment, start_gunicorn, stop  # noqa: E402

SLUG = "crowd"
DURATION = 4.0  # seconds of each sound, as in DCASE 2023 Task 7
CHECKPOINT_S = 5  # the page's checkpoint while a sound plays (raters/static/raters/listen.js)
TOKEN = re.compile(r'name="token" value="([^"]+)"')
KEY = re.compile(r'name="key" value="([^"]+)"')
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
PRELOAD = re.compile(r'<audio preload="auto" src="[^"]*/audio/([^/"]+)/" hidden')
EXAMPLE = re.compile(r'<audio controls preload="auto" data-token="([^"]+)"')
SESSION = re.compile(r'name="session" value="(\d+)"')
# Why the server refused an answer as not heard (raters/listening.py's reasons), for the table.
REFUSALS = {
    "reached your browser": "sound not yet received whole",
    "Please play the": "not played",
    "please listen to all of it. Only": "heard too little",
    "Please listen to the": "sound never fetched",
}


def uptime() -> str:
    """The machine's load and size, for the record: it may be shared."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} cores"


# --- The scratch site --------------------------------------------------------------------------------


def scratch_database() -> tuple[str, str]:
    """Create an empty database beside DATABASE_URL's; returns (its URL, the admin URL)."""
    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    parts = urlsplit(base)
    name = f"foley_load_{secrets.token_hex(4)}"
    admin = urlunsplit(parts._replace(path="/postgres"))
    _admin_sql(admin, f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}")), admin


def _admin_sql(admin: str, sql: str) -> None:
    import psycopg2

    conn = psycopg2.connect(admin)
    conn.autocommit = True
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql)
    finally:
        conn.close()


def drop_database(url: str, admin: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    _admin_sql(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def django_setup(env: dict[str, str]) -> None:
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def build_challenge(listened_fraction: float = 0.0):
    from raters import preparation
    from tests.listening_setup import build_listening_challenge

    challenge = build_listening_challenge(
        slug=SLUG,
        categories=4,
        systems_per_track=2,
        clips_per_system=5,
        dev_per_category=12,
        duration=DURATION,
        sample_rate=22_050,
        target_ratings=1000,
        listened_fraction=listened_fraction,
    )
    preparation.set_open(challenge, True)
    return challenge


def enrol(challenge, n: int) -> list[str]:
    """`n` raters past consent and instructions, each with a category begun; their links."""
    from raters import enrolment, sessions

    keys = []
    for k in range(n):
        rater = enrolment.invite(challenge, label=f"load {k}")
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)
        session = sessions.next_session(rater).session
        sessions.complete_familiarization(session, require_heard=False)
        keys.append(rater.access_key)
    return keys


# --- The storm ---------------------------------------------------------------------------------------


@dataclass
class Tally:
    page: list[float] = field(default_factory=list)
    save: list[float] = field(default_factory=list)
    audio: list[float] = field(default_factory=list)
    event: list[float] = field(default_factory=list)  # the player's events (with --listen)
    lag: list[float] = field(default_factory=list)  # the load generator's own loop (`loop_lag`)
    timeline: list[tuple[float, str, float]] = field(default_factory=list)  # (end, kind, s)
    errors: dict[str, int] = field(default_factory=dict)
    acknowledged: list[tuple[str, str]] = field(default_factory=list)  # (key, trial token)
    acknowledged_at: list[float] = field(default_factory=list)  # time.monotonic() of each
    attempted: int = 0
    began: float = 0.0
    resent: int = 0
    ended: float = 0.0

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


async def rater(
    base: str,
    key: str,
    deadline: float,
    tally: Tally,
    think: tuple[float, float],
    listen: bool = False,
):
    import aiohttp

    # A browser's connections: a few at most, kept alive between requests and dropped after 5 s
    # idle (as the httpx client this replaced did, so the server sees the same connections).
    connector = aiohttp.TCPConnector(limit=6, force_close=False, keepalive_timeout=5.0)

    # When a request's headers left (`trace_request_ctx`, a dict): a page's player posts `play`
    # as the sound starts, so the sound's clock starts when that post leaves, not before this
    # loop got round to sending it (on two saturated cores it can be half a second late).
    async def headers_sent(session, context, params) -> None:
        if isinstance(context.trace_request_ctx, dict):
            context.trace_request_ctx["sent"] = time.monotonic()  # a resend: the last

    sending = aiohttp.TraceConfig()
    sending.on_request_headers_sent.append(headers_sent)
    session = aiohttp.ClientSession(
        trace_configs=[sending],
        connector=connector,
        cookie_jar=aiohttp.CookieJar(unsafe=True),  # cookies on 127.0.0.1 (an IP host)
        timeout=aiohttp.ClientTimeout(total=60.0),
    )
    # aiohttp resends a GET once, silently, when a kept-alive connection was closed under it:
    # this loop resends itself, every method alike, and counts it.
    session._retry_connection = False
    async with session:

        async def fetch(method: str, path: str, body: str, **kw) -> tuple[int, str]:
            """One request, its answer read to the end (not followed if a redirect): the
            status and, for body "text", the text (body "discard": the bytes are dropped)."""
            async with session.request(
                method, base + path, allow_redirects=False, **kw
            ) as response:
                if body == "text" or response.status == 409:  # a refusal says why
                    return response.status, (await response.read()).decode(errors="replace")
                # The whole body, dropped chunk by chunk (cheaper than one `read()` of it).
                async for _ in response.content.iter_chunked(1 << 16):
                    pass
                return response.status, ""

        async def timed(kind: str, method: str, path: str, body: str = "text", **kw):
            started = time.perf_counter()
            try:
                try:
                    answer = await fetch(method, path, body, **kw)
                except aiohttp.ClientConnectorError:
                    raise  # no connection at all: an error, not a closed one
                except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                    # The server closed a kept-alive connection as the request went out on it:
                    # browsers send the request again on a new connection, and so does this
                    # (an answer resent carries its key, so it is stored once).
                    tally.resent += 1
                    answer = await fetch(method, path, body, **kw)
            except (aiohttp.ClientError, TimeoutError) as exc:
                tally.error(f"{kind}: {type(exc).__name__}")
                return None
            took = time.perf_counter() - started
            getattr(tally, kind).append(took)
            tally.timeline.append((time.monotonic() - tally.began, kind, took))
            if answer[0] >= 400:
                why = next((w for p, w in REFUSALS.items() if p in answer[1]), "")
                tally.error(f"{kind}: HTTP {answer[0]}{f' ({why})' if why else ''}")
                return None
            return answer

        async def play(token: str, csrf: str) -> float:
            """Play a sound to its end as the page's player reports it: play, a checkpoint every
            `CHECKPOINT_S` (none in the last half second), ended; returns the seconds it took
            (part of the think time)."""
            began = time.monotonic()
            started = None  # when the play left: the sound starts then
            headers = {"X-CSRFToken": csrf, "Accept": "application/json"}
            checkpoints = [
                ("timeupdate", float(s))
                for s in range(CHECKPOINT_S, int(DURATION), CHECKPOINT_S)
                if s < DURATION - 0.5
            ]
            for event, t in [("play", 0.0), *checkpoints, ("ended", DURATION)]:
                if started is not None:
                    await asyncio.sleep(max(0.0, started + t - time.monotonic()))
                sent: dict[str, float] = {}
                await timed(
                    "event",
                    "POST",
                    f"/listen/{SLUG}/player/",
                    "discard",
                    json={"token": token, "event": event, "t": t},
                    headers=headers,
                    trace_request_ctx=sent,
                )
                if started is None:
                    started = sent.get("sent", began)
            return time.monotonic() - began

        # Arrivals spread over the first think time, as a crowd trickles in.
        await asyncio.sleep(random.uniform(0, think[1]))
        await fetch("GET", f"/listen/{SLUG}/join/{key}/", "discard")
        cached: set[str] = set()  # the sounds this browser holds
        while time.monotonic() < deadline:
            response = await timed("page", "GET", f"/listen/{SLUG}/")
            if response is None:
                await asyncio.sleep(1)
                continue
            page = response[1]
            csrf = CSRF.search(page)
            csrf = csrf.group(1) if csrf else ""
            token = TOKEN.search(page)
            if token:
                token = token.group(1)
                # As a browser: the sound comes from its cache when the previous page preloaded
                # it, and the next one preloads in the background while this one plays.
                if token not in cached:
                    await timed(
                        "audio",
                        "GET",
                        f"/listen/{SLUG}/audio/{token}/",
                        "discard",
                        headers={"Range": "bytes=0-"},
                    )
                    cached.add(token)
                following = PRELOAD.search(page)
                preload = None
                if following and following.group(1) not in cached:
                    cached.add(following.group(1))
                    preload = asyncio.create_task(
                        timed(
                            "audio",
                            "GET",
                            f"/listen/{SLUG}/audio/{following.group(1)}/",
                            "discard",
                            headers={"Range": "bytes=0-"},
                        )
                    )
                pause = random.uniform(*think)
                if listen:  # the sound is heard in full, within the think time
                    pause -= await play(token, csrf)
                await asyncio.sleep(max(0.0, pause))
                if preload is not None:
                    await preload
                form = {
                    "token": token,
                    "key": KEY.search(page).group(1),
                    "quality": str(random.randint(3, 8)),
                    "fit": str(random.randint(3, 8)),
                    "csrfmiddlewaretoken": csrf,
                }
                tally.attempted += 1
                saved = await timed("save", "POST", f"/listen/{SLUG}/rate/", "discard", data=form)
                if saved is not None and saved[0] == 303:
                    tally.acknowledged.append((form["key"], token))
                    tally.acknowledged_at.append(time.monotonic())
            elif 'name="session"' in page:  # a new category's examples
                for example in EXAMPLE.findall(page):
                    await timed(
                        "audio",
                        "GET",
                        f"/listen/{SLUG}/audio/{example}/",
                        "discard",
                        headers={"Range": "bytes=0-"},
                    )
                    if listen:
                        await play(example, csrf)
                session_id = SESSION.search(page).group(1)
                await fetch(
                    "POST",
                    f"/listen/{SLUG}/start/",
                    "discard",
                    data={"session": session_id, "csrfmiddlewaretoken": csrf},
                )
            elif f"/listen/{SLUG}/next/" in page:  # the break between categories
                await fetch(
                    "POST", f"/listen/{SLUG}/next/", "discard", data={"csrfmiddlewaretoken": csrf}
                )
            else:  # the end, or a page this loop does not know: this rater is done
                return


def percentiles(values: list[float]) -> str:
    if not values:
        return "-"
    q = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else values * 99
    return f"{1000 * q[49]:.0f} / {1000 * q[94]:.0f} / {1000 * q[98]:.0f} ms"


def integrity(tally: Tally, raters: list[str], since) -> str:
    """Answers stored for the acknowledged keys, answers twice, and answers of this run's
    raters stored but never acknowledged (the client gave up waiting)."""
    from django.db.models import Count

    from raters.models import Rating

    keys = [k for k, _ in tally.acknowledged]
    stored = Rating.objects.filter(idempotency_key__in=keys).count()
    all_rows = Rating.objects.filter(
        trial__session__rater__access_key__in=raters, created_at__gte=since
    )
    twice = (
        all_rows.values("trial_id").annotate(n=Count("id")).filter(n__gt=1).count()
        + all_rows.values("idempotency_key").annotate(n=Count("id")).filter(n__gt=1).count()
    )
    extra = all_rows.count() - stored
    lost = len(set(keys)) - stored
    return (
        f"acknowledged {len(keys)}, stored {stored}, lost {lost}, duplicated {twice}, "
        f"stored but unacknowledged (client gave up) {extra}"
    )


async def loop_lag(deadline: float, tally: Tally) -> None:
    """How late this process's event loop wakes a 10 ms sleep, until the deadline: a response
    that arrived while the loop was busy is timed late by as much (the load generator shares
    the cores with the server)."""
    while time.monotonic() < deadline:
        asked = time.monotonic()
        await asyncio.sleep(0.01)
        tally.lag.append(max(0.0, time.monotonic() - asked - 0.01))


async def storm(
    base: str, keys: list[str], duration: float, think: tuple[float, float], listen: bool
) -> Tally:
    tally = Tally()
    tally.began = time.monotonic()
    deadline = tally.began + duration
    tasks = [asyncio.create_task(rater(base, key, deadline, tally, think, listen)) for key in keys]
    lag = asyncio.create_task(loop_lag(deadline, tally))
    # Bounded: every rater finishes its cycle under way, or is cancelled 90 s after the end.
    done, pending = await asyncio.wait(tasks, timeout=duration + 90)
    lag.cancel()
    for task in pending:
        task.cancel()
        tally.error("cancelled at the end")
    await asyncio.gather(*pending, return_exceptions=True)
    tally.ended = time.monotonic()
    for task in done:
        if task.exception() is not None:
            tally.error(f"client: {type(task.exception()).__name__}")
    return tally


def run_storms(args) -> None:
    if args.duration < 3 * args.think_max:  # the steady window: see the rate below
        raise SystemExit(f"--duration must be at least {3 * args.think_max:g} s")
    scratch = Path(tempfile.mkdtemp(prefix="foley-load-"))
    url, admin = scratch_database()
    env = site_environment(url, scratch)
    print(f"load at start: {uptime()}")
    front = "nginx in front (sounds by X-Accel-Redirect)" if args.nginx else "no proxy"
    print(f"gunicorn {args.gunicorn}; {front}; database {urlsplit(url).path.lstrip('/')}")
    process = proxy = None
    try:
        django_setup(env)
        started = time.perf_counter()
        # With --listen the server's check is the DCASE default (0.9 of each sound heard).
        challenge = build_challenge(0.9 if args.listen else 0.0)
        keys = enrol(challenge, max(args.raters))
        print(f"set-up: {time.perf_counter() - started:.0f} s for {len(keys)} raters")
        from django.db import connection

        connection.close()  # the web process has the database to itself during the storm
        if args.nginx:
            # Sounds by nginx after Django's token check, as docker-compose runs it.
            env["AUDIO_ACCEL_REDIRECT"] = "/_sounds/"
            env["PROXY_REQUEST_START"] = "1"
        process, base = start_gunicorn(env, args.gunicorn, scratch / "gunicorn.log")
        if args.nginx:
            from tests.nginx_site import start_nginx

            static = scratch / "static"
            static.mkdir()
            upstream = base.split("//", 1)[1]
            proxy, base = start_nginx(
                upstream, scratch / "media", static, scratch / "nginx", workers=args.nginx_workers
            )
        print(
            "| raters at once | ratings/s (offered) | save p50 / p95 / p99 | page p50 / p95 / p99 "
            "| audio p50 / p95 / p99 | errors | integrity |"
        )
        print("|---|---|---|---|---|---|---|")
        offset = 0
        generator = []  # per run: the load generator's own CPU
        for n in args.raters:
            # Each run with raters of its own while there are enough, so runs start alike.
            group = keys[offset : offset + n] if offset + n <= len(keys) else keys[:n]
            offset += n
            from django.utils import timezone

            since = timezone.now()
            cpu = time.process_time()  # this process only: gunicorn and nginx are its children
            think = (args.think_min, args.think_max)
            tally = asyncio.run(storm(base, group, args.duration, think, args.listen))
            cpu = time.process_time() - cpu
            ratings = len(tally.acknowledged)
            generator.append(
                f"load generator, {n} raters: "
                f"{f'{1000 * cpu / ratings:.1f}' if ratings else '-'} ms CPU per rating "
                f"({100 * cpu / (tally.ended - tally.began):.0f}% of one core); its loop woke "
                f"late by p50 / p95 / p99 {percentiles(tally.lag)}"
            )
            if args.listen:
                generator.append(
                    f"player events, {n} raters: {len(tally.event)}, "
                    f"p50 / p95 / p99 {percentiles(tally.event)}"
                )
            # Ratings per second in the steady state: once every rater has arrived (the first
            # think time) and answered once (a second one), until the end of the run (raters
            # thinking then still answer, ever fewer: a tail, not the rate). The offered rate
            # is what the raters would give with no wait at all: one answer per mean think time.
            window = (tally.began + 2 * args.think_max, tally.began + args.duration)
            steady = sum(window[0] <= t <= window[1] for t in tally.acknowledged_at)
            rate = steady / (window[1] - window[0])
            offered = n / ((args.think_min + args.think_max) / 2)
            errors = sum(tally.errors.values())
            detail = ", ".join(f"{k}: {v}" for k, v in sorted(tally.errors.items()))
            if tally.resent:
                detail += f"{'; ' if detail else ''}resent on a closed connection: {tally.resent}"
            print(
                f"| {n} | {rate:.1f} ({offered:.0f}) | {percentiles(tally.save)} | {percentiles(tally.page)} "
                f"| {percentiles(tally.audio)} | {errors}{f' ({detail})' if detail else ''} "
                f"| {integrity(tally, group, since)} |",
                flush=True,
            )
            connection.close()
            if args.timeline:
                with args.timeline.open("a") as out:
                    out.writelines(
                        f"{n},{t:.3f},{k},{1000 * d:.1f}\n" for t, k, d in tally.timeline
                    )
        for line in generator:  # after the table, which stays whole
            print(line)
    finally:
        if proxy is not None:
            from tests.nginx_site import stop_nginx

            stop_nginx(proxy)
        if process is not None:
            stop(process)
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(url, admin)
        print(f"load at end: {uptime()}")


# --- Cost per request -------------------------------------------------------------------------------


def run_cost(args) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="foley-cost-"))
    url, admin = scratch_database()
    env = site_environment(url, scratch)
    print(f"load at start: {uptime()}")
    try:
        django_setup(env)
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext

        from raters.models import CategorySession
        from tests.listening_setup import add_closed_sessions

        challenge = build_challenge()
        keys = enrol(challenge, 1)
        client = Client()
        client.get(f"/listen/{SLUG}/join/{keys[0]}/")
        print("| sessions | page: queries, median time | save: queries, median time |")
        print("|---|---|---|")
        for n, wanted in enumerate(args.sessions):
            add_closed_sessions(challenge, wanted - CategorySession.objects.count())
            pages, saves, page_q, save_q = [], [], set(), set()
            warm = 5 if n == 0 else 0  # templates compiled, connections open: not measured
            for k in range(args.requests + warm):
                if k == warm:
                    pages, saves, page_q, save_q = [], [], set(), set()
                with CaptureQueriesContext(connection) as queries:
                    t0 = time.perf_counter()
                    page = client.get(f"/listen/{SLUG}/").content.decode()
                    took = time.perf_counter() - t0
                token = TOKEN.search(page)
                if token is not None:  # trial pages only (not the break between categories)
                    pages.append(took)
                    page_q.add(len(queries))
                else:  # the category is done: the next one
                    client.post(f"/listen/{SLUG}/next/")
                    session = CategorySession.objects.get(rater__access_key=keys[0], state="open")
                    from raters import sessions

                    sessions.complete_familiarization(session, require_heard=False)
                    continue
                sound = client.get(f"/listen/{SLUG}/audio/{token.group(1)}/", HTTP_RANGE="bytes=0-")
                b"".join(sound.streaming_content)  # read to its end: the delivery is recorded
                form = {"token": token.group(1), "key": KEY.search(page).group(1)}
                with CaptureQueriesContext(connection) as queries:
                    t0 = time.perf_counter()
                    client.post(f"/listen/{SLUG}/rate/", {**form, "quality": "5", "fit": "5"})
                    saves.append(time.perf_counter() - t0)
                save_q.add(len(queries))
            print(
                f"| {CategorySession.objects.count()} "
                f"| {'/'.join(map(str, sorted(page_q)))}, {1000 * statistics.median(pages):.1f} ms "
                f"| {'/'.join(map(str, sorted(save_q)))}, {1000 * statistics.median(saves):.1f} ms |",
                flush=True,
            )
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(url, admin)
        print(f"load at end: {uptime()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raters", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--duration", type=float, default=60, help="seconds of storm per run")
    parser.add_argument("--think-min", type=float, default=5.0)
    parser.add_argument("--think-max", type=float, default=15.0)
    parser.add_argument(
        "--gunicorn",
        default="--workers 5",
        help="gunicorn options (worker model and counts); the default is docker-compose's",
    )
    parser.add_argument(
        "--nginx", action="store_true", help="deploy/nginx.conf in front, sounds sent by nginx"
    )
    parser.add_argument(
        "--listen",
        action="store_true",
        help="browsers report the player's events as they play each sound to its end, and the "
        "server checks 90%% was heard before an answer (the DCASE default)",
    )
    parser.add_argument("--cost", action="store_true", help="queries and time per request")
    parser.add_argument("--sessions", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    parser.add_argument(
        "--nginx-workers", default="auto", help="nginx's worker_processes (as shipped: auto)"
    )
    parser.add_argument(
        "--timeline", type=Path, help="write every timed request (raters, end s, kind, ms) as CSV"
    )
    args = parser.parse_args()
    if args.cost:
        run_cost(args)
    else:
        run_storms(args)


if __name__ == "__main__":
    main()
