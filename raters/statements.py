"""The statements every request of a rater makes, in SQL built once per process: the rater
behind a browser's cookie (with its challenge, test settings and judge role), a trial by its
token with the audio the rater's browser receives, a session's trials and its first unanswered
ones, and the conditional writes of a sound's delivery and of a player's event.

Every request of a rater makes some of them (a page, each sound, each event, each answer).
Through the ORM, building these joins cost more CPU than the database spends answering them
(about 0.7 ms of Python per query, most of a sound fetch), and at crowd scale that CPU is what
runs out. The statements are built from the models' metadata, and each row becomes model
instances as the ORM makes them (the fields' converters, then `Model.from_db`), so callers get
ordinary objects.

On PostgreSQL each statement is prepared once per database connection (`run`): planning these
joins took the server four to six times as long as running them. A connection pooler in front
must therefore keep one server connection per client connection (docs/deployment.md).
"""

from __future__ import annotations

import hashlib
import re
import threading
import weakref
from dataclasses import dataclass
from functools import cache

from django.db import connection, transaction
from django.db.models import Model, signals
from django.db.models.base import ModelState

from stimuli.models import AudioFile, Category, Challenge

from .delivery import delivery_settings
from .models import (
    CategorySession,
    DeliveredAudio,
    ListeningTest,
    Rater,
    Rating,
    Stimulus,
    TextJudge,
    Trial,
)

# The statements prepared on each PostgreSQL connection (a connection that is closed, or lost
# with its server, takes its statements with it, and its entry goes with it).
_prepared: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_prepared_lock = threading.Lock()


def _numbered(sql: str) -> str:
    """`%s` placeholders as PostgreSQL's `$1, $2, ...` (the statements hold no other `%`)."""
    count = iter(range(1, sql.count("%s") + 1))
    return re.sub("%s", lambda _: f"${next(count)}", sql)


def _execute(cursor, name: str | None, sql: str, params: list) -> None:
    if name is None or connection.vendor != "postgresql":
        cursor.execute(sql, params)
        return
    raw = connection.connection
    with _prepared_lock:
        names = _prepared.setdefault(raw, set())
        known = name in names
    if not known:
        cursor.execute(f"PREPARE {name} AS {_numbered(sql)}")
        with _prepared_lock:
            names.add(name)
    cursor.execute(f"EXECUTE {name}({', '.join(['%s'] * len(params))})", params)


def run(name: str | None, sql: str, params: list) -> list[tuple]:
    """The rows of one statement (`%s` placeholders); with a `name`, on PostgreSQL, prepared on
    this connection the first time and executed by name after. A statement whose text varies
    (a list of ids) has no name."""
    with connection.cursor() as cursor:
        _execute(cursor, name, sql, params)
        return cursor.fetchall()


@dataclass(frozen=True)
class _Part:
    """One model's columns in a statement: where they are in the row, and how to read them."""

    model: type[Model]
    names: tuple[str, ...]
    converters: tuple[tuple, ...]  # per column, (converter, expression) pairs as the ORM runs them
    start: int
    plain: bool  # no receiver of the model's pre_init or post_init signals

    def build(self, row: tuple) -> Model | None:
        values = list(row[self.start : self.start + len(self.names)])
        if values[0] is None:  # the primary key of an outer join that found nothing
            return None
        for n, steps in enumerate(self.converters):
            for convert, expression in steps:
                values[n] = convert(values[n], expression, connection)
        if not self.plain:
            return self.model.from_db(connection.alias, list(self.names), values)
        # What `Model.from_db` makes, without `__init__`'s walk over the fields and its two
        # signals (nothing listens to them for this model): a rater's request builds four to
        # six instances, and that walk was a tenth of the web process's time at crowd scale.
        instance = self.model.__new__(self.model)
        instance._state = ModelState()
        instance._state.adding, instance._state.db = False, connection.alias
        instance.__dict__.update(zip(self.names, values, strict=True))
        return instance


def _part(model: type[Model], alias: str, start: int) -> tuple[_Part, str]:
    fields = [model._meta.pk] + [f for f in model._meta.concrete_fields if not f.primary_key]
    converters = []
    for field in fields:
        column = field.get_col(alias)
        steps = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        converters.append(tuple((step, column) for step in steps))
    quote = connection.ops.quote_name
    sql = ", ".join(f"{alias}.{quote(field.column)}" for field in fields)
    names = tuple(f.attname for f in fields)
    plain = names == tuple(f.attname for f in model._meta.concrete_fields) and not (
        signals.pre_init.has_listeners(model) or signals.post_init.has_listeners(model)
    )
    return _Part(model, names, tuple(converters), start, plain), sql


def _table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


@cache
def _rater_statement(vendor: str, *, with_trial: bool) -> tuple[str, tuple[_Part, ...]]:
    rater, rater_sql = _part(Rater, "r", 0)
    challenge, challenge_sql = _part(Challenge, "c", len(rater.names))
    test, test_sql = _part(ListeningTest, "t", challenge.start + len(challenge.names))
    judge, judge_sql = _part(TextJudge, "j", test.start + len(test.names))
    columns, parts = (
        [rater_sql, challenge_sql, test_sql, judge_sql],
        [rater, challenge, test, judge],
    )
    joins = (
        f"FROM {_table(Rater)} r JOIN {_table(Challenge)} c ON c.id = r.challenge_id "
        f"LEFT JOIN {_table(ListeningTest)} t ON t.challenge_id = c.id "
        f"LEFT JOIN {_table(TextJudge)} j ON j.rater_id = r.id "
    )
    if with_trial:
        # The rater's trial with the token, if any, and the audio its browser receives under the
        # test's delivery settings (`delivery.delivery_settings`, here from the test's columns).
        trial, trial_sql = _part(Trial, "tr", judge.start + len(judge.names))
        delivered, delivered_sql = _part(AudioFile, "a", trial.start + len(trial.names))
        columns += [trial_sql, delivered_sql]
        parts += [trial, delivered]
        joins += (
            f"LEFT JOIN ({_table(Trial)} tr JOIN {_table(CategorySession)} s "
            "ON s.id = tr.session_id) ON tr.token = %s AND s.rater_id = r.id "
            f"LEFT JOIN {_table(DeliveredAudio)} d ON d.source_id = tr.audio_id "
            "AND d.aligned = t.loudness_alignment AND d.target_lufs = "
            "(CASE WHEN t.loudness_alignment THEN t.target_lufs ELSE 0.0 END) "
            "AND d.sample_rate = c.sample_rate "
            f"LEFT JOIN {_table(AudioFile)} a ON a.id = d.audio_id "
        )
    sql = f"SELECT {', '.join(columns)} {joins}WHERE r.access_key = %s AND c.slug = %s"
    return sql, tuple(parts)


def rater_by_key(access_key: str, slug: str, token: str | None = None) -> Rater | None:
    """The rater with this access key in the challenge `slug`, with its challenge, the
    challenge's listening test and the rater's text-prompt judge role read in the same query;
    with a `token`, the rater's trial of that token too (`trial_of`, None if there is none), as
    `rater.trial_read` (token, trial): a sound's fetch and a player's event need no second."""
    sql, parts = _rater_statement(connection.vendor, with_trial=token is not None)
    params = [access_key, slug] if token is None else [token, access_key, slug]
    name = "foley_rater_by_key" if token is None else "foley_rater_and_trial"
    rows = run(name, sql, params)
    if not rows:
        return None
    row = rows[0]
    rater, challenge = parts[0].build(row), parts[1].build(row)
    # For `selectors.listening_test` during this request only (a Challenge's cached relation
    # would be read by code that expects the settings as they are now).
    challenge.listening_test_of_request = parts[2].build(row)
    Rater.text_judge.related.set_cached_value(rater, parts[3].build(row))
    rater.challenge = challenge
    if token is not None:
        rater.trial_read = (token, _trial(row, parts[4:]))
    return rater


@cache
def _sessions_statement(vendor: str) -> tuple[str, tuple[_Part, ...]]:
    session, session_sql = _part(CategorySession, "s", 1)
    category, category_sql = _part(Category, "g", session.start + len(session.names))
    quote = connection.ops.quote_name
    sql = (
        f"SELECT (SELECT COUNT(DISTINCT st.category_id) FROM {_table(Stimulus)} st "
        f"WHERE st.challenge_id = %s), {session_sql}, {category_sql} FROM (SELECT 1) one "
        f"LEFT JOIN {_table(CategorySession)} s ON s.rater_id = %s "
        f"LEFT JOIN {_table(Category)} g ON g.id = s.category_id ORDER BY s.{quote('order')}"
    )
    return sql, (session, category)


def rater_sessions(rater: Rater) -> tuple[list[CategorySession], int]:
    """The rater's sessions in order, each with its category, and how many categories have
    stimuli (a rater cannot be asked for more): the trial page's one read of them."""
    sql, (session_part, category_part) = _sessions_statement(connection.vendor)
    rows = run("foley_rater_sessions", sql, [rater.challenge_id, rater.pk])
    own = []
    for row in rows:
        session = session_part.build(row)
        if session is not None:
            session.category, session.rater = category_part.build(row), rater
            own.append(session)
    return own, rows[0][0]


@cache
def _trial_statement(vendor: str, *, answering: bool) -> tuple[str, tuple[_Part, ...]]:
    trial, trial_sql = _part(Trial, "tr", 0)
    delivered, delivered_sql = _part(AudioFile, "a", len(trial.names))
    columns, parts = [trial_sql, delivered_sql], [trial, delivered]
    if answering:
        session, session_sql = _part(CategorySession, "s", delivered.start + len(delivered.names))
        test, test_sql = _part(ListeningTest, "lt", session.start + len(session.names))
        columns += [session_sql, test_sql]
        parts += [session, test]
    sql = (
        f"SELECT {', '.join(columns)} FROM {_table(Trial)} tr "
        f"JOIN {_table(CategorySession)} s ON s.id = tr.session_id "
        f"LEFT JOIN {_table(DeliveredAudio)} d ON d.source_id = tr.audio_id "
        "AND d.aligned = %s AND d.target_lufs = %s AND d.sample_rate = %s "
        f"LEFT JOIN {_table(AudioFile)} a ON a.id = d.audio_id "
    )
    if answering:
        sql += f"JOIN {_table(ListeningTest)} lt ON lt.challenge_id = %s "
    sql += "WHERE tr.token = %s"
    if not answering:
        sql += " AND s.rater_id = %s"
    elif connection.features.has_select_for_no_key_update:
        # Answers to one session are stored one at a time (see `sessions.save_rating`), and
        # the test's row is held so that closing it waits for the answers under way.
        sql += " FOR NO KEY UPDATE OF s FOR SHARE OF lt"
    return sql, tuple(parts)


def _trial(row: tuple, parts: tuple[_Part, ...]) -> Trial | None:
    trial = parts[0].build(row)
    if trial is not None:
        # The delivered sound, as `delivery.delivered_of` reads it; None: not rendered yet.
        trial.delivered = parts[1].build(row)
    return trial


def trial_of(rater: Rater, token: str, test: ListeningTest) -> Trial | None:
    """The rater's trial with this token, with the audio its browser receives (`delivered`)."""
    sql, parts = _trial_statement(connection.vendor, answering=False)
    rows = run("foley_trial_of", sql, [*delivery_settings(test), token, rater.pk])
    return _trial(rows[0], parts) if rows else None


def trial_to_answer(token: str, test: ListeningTest) -> tuple[Trial, ListeningTest] | None:
    """The trial with this token to store an answer to, with its session (locked until the
    answer's transaction ends, on PostgreSQL) and `delivered`; and the listening test as it is
    now, held (FOR SHARE) as long."""
    sql, parts = _trial_statement(connection.vendor, answering=True)
    rows = run("foley_trial_to_answer", sql, [*delivery_settings(test), test.challenge_id, token])
    if not rows:
        return None
    row = rows[0]
    trial = _trial(row, parts)
    trial.session = parts[2].build(row)
    return trial, parts[3].build(row)


def session_trials(session_id: int) -> list[tuple[int, int, str, int | None]]:
    """(trial id, position, token, answer id or None) of every trial of the session, in order."""
    sql = (
        f"SELECT t.id, t.position, t.token, k.id FROM {_table(Trial)} t "
        f"LEFT JOIN {_table(Rating)} k ON k.trial_id = t.id WHERE t.session_id = %s "
        "ORDER BY t.position"
    )
    return run("foley_session_trials", sql, [session_id])


def keyed_and_unanswered(key: str, session_id: int) -> tuple[int | None, list[tuple[int, int]]]:
    """The trial of the answer stored with this request key, if any, and (trial id, position)
    of the session's first two trials without an answer."""
    first = (
        f"SELECT t.id AS trial, t.position AS position FROM {_table(Trial)} t "
        f"LEFT JOIN {_table(Rating)} k ON k.trial_id = t.id "
        "WHERE t.session_id = %s AND k.id IS NULL ORDER BY t.position LIMIT 2"
    )
    sql = (
        f"SELECT (SELECT trial_id FROM {_table(Rating)} WHERE idempotency_key = %s), "
        f"u.trial, u.position FROM (SELECT 1) one LEFT JOIN ({first}) u ON 1 = 1 "
        "ORDER BY u.position"
    )
    rows = run("foley_keyed_and_unanswered", sql, [key, session_id])
    return rows[0][0], [(pk, position) for _, pk, position in rows if pk is not None]


def insert(model: type[Model], values: dict) -> int:
    """Insert one row of `model` with these field values; its primary key. One prepared
    statement, for the answers a rater stores."""
    names = tuple(values)
    sql = _insert_statement(connection.vendor, model, names)
    meta = model._meta
    params = [meta.get_field(n).get_db_prep_save(v, connection) for n, v in values.items()]
    name = "foley_insert_" + hashlib.sha1(sql.encode()).hexdigest()[:16]
    with connection.cursor() as cursor:
        _execute(cursor, name, sql, params)
        return cursor.fetchone()[0]


@cache
def _insert_statement(vendor: str, model: type[Model], names: tuple) -> str:
    quote = connection.ops.quote_name
    columns = ", ".join(quote(model._meta.get_field(n).column) for n in names)
    placeholders = ", ".join(["%s"] * len(names))
    return (
        f"INSERT INTO {_table(model)} ({columns}) VALUES ({placeholders}) "
        f"RETURNING {quote(model._meta.pk.column)}"
    )


@cache
def _update_statement(vendor: str, model: type[Model], sets: tuple, wheres: tuple) -> str:
    quote = connection.ops.quote_name
    same = "IS NOT DISTINCT FROM" if vendor == "postgresql" else "IS"  # NULL-safe equality
    column = {name: quote(model._meta.get_field(name).column) for name in sets + wheres}
    return (
        f"UPDATE {_table(model)} SET {', '.join(f'{column[n]} = %s' for n in sets)} "
        f"WHERE {quote(model._meta.pk.column)} = %s"
        + "".join(f" AND {column[n]} {same} %s" for n in wheres)
    )


def update(model: type[Model], pk: int, changed: dict, *, read: dict | None = None) -> bool:
    """Write `changed` on the row, only if its fields in `read` (if any) still hold the values
    read (NULL equal to NULL); whether it did. One prepared statement: a rater's write."""
    read = read or {}
    sets, wheres = tuple(changed), tuple(read)
    sql = _update_statement(connection.vendor, model, sets, wheres)
    fields = {name: model._meta.get_field(name) for name in sets + wheres}
    params = [fields[n].get_db_prep_value(v, connection) for n, v in changed.items()]
    params.append(pk)
    params += [fields[n].get_db_prep_value(v, connection) for n, v in read.items()]
    name = "foley_update_" + hashlib.sha1(sql.encode()).hexdigest()[:16]
    with connection.cursor() as cursor:
        _execute(cursor, name, sql, params)
        return cursor.rowcount == 1


def deliver_whole(model: type[Model], pk: int, size: int, moment) -> None:
    """Record that all `size` bytes of the row's sound were sent, whatever was recorded before:
    one statement, no read (the whole file covers every range recorded)."""
    quote = connection.ops.quote_name
    ranges, served, delivered = (
        quote(model._meta.get_field(n).column)
        for n in ("delivered_ranges", "served_at", "delivered_at")
    )
    sql = (
        f"UPDATE {_table(model)} SET {ranges} = %s, {served} = COALESCE({served}, %s), "
        f"{delivered} = COALESCE({delivered}, %s) WHERE id = %s"
    )
    field = model._meta.get_field("delivered_ranges")
    when = model._meta.get_field("served_at").get_db_prep_value(moment, connection)
    params = [field.get_db_prep_value([[0, size]], connection), when, when, pk]
    with connection.cursor() as cursor:
        _execute(cursor, f"foley_deliver_{model._meta.model_name}", sql, params)


@cache
def _event_statements(
    vendor: str, model, row_fields: tuple, rater_fields: tuple
) -> tuple[str, ...]:
    """The write of one player event: the rater's fields, only if no other event of the rater
    came since they were read (its `listening_version`), and the sound's row with them. One
    statement on PostgreSQL (the row's update waits on the rater's); two in a transaction
    elsewhere."""
    quote = connection.ops.quote_name
    rater_sets = ", ".join(f"{quote(Rater._meta.get_field(n).column)} = %s" for n in rater_fields)
    version = quote(Rater._meta.get_field("listening_version").column)
    rater_sql = (
        f"UPDATE {_table(Rater)} SET {rater_sets}, {version} = {version} + 1 "
        f"WHERE id = %s AND {version} = %s"
    )
    if model is None:
        return (rater_sql,)
    row_sets = ", ".join(f"{quote(model._meta.get_field(n).column)} = %s" for n in row_fields)
    row_sql = f"UPDATE {_table(model)} SET {row_sets} WHERE id = %s"
    if vendor == "postgresql":
        return (f"WITH r AS ({rater_sql} RETURNING id) {row_sql} AND EXISTS (SELECT 1 FROM r)",)
    return rater_sql, row_sql


def write_event(
    rater: Rater, version: int, model, row, row_fields: tuple, rater_fields: tuple
) -> bool:
    """Write a player event's changes to `rater` and (unless `model` is None) its sound's `row`,
    provided the rater's `listening_version` is still `version`; whether it did."""
    statements = _event_statements(connection.vendor, model, row_fields, rater_fields)

    def values(obj, names) -> list:
        meta = type(obj)._meta
        return [meta.get_field(n).get_db_prep_value(getattr(obj, n), connection) for n in names]

    rater_params = [*values(rater, rater_fields), rater.pk, version]
    if model is None:
        params = [rater_params]
    else:
        row_params = [*values(row, row_fields), row.pk]
        params = [rater_params + row_params] if len(statements) == 1 else [rater_params, row_params]
    with connection.cursor() as cursor:
        if len(statements) == 1:
            sql = statements[0]
            name = "foley_event_" + hashlib.sha1(sql.encode()).hexdigest()[:16]
            _execute(cursor, name, sql, params[0])
            return cursor.rowcount == 1
        with transaction.atomic():
            cursor.execute(statements[0], params[0])
            if cursor.rowcount != 1:
                return False
            cursor.execute(statements[1], params[1])
            return True
