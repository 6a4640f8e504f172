"""Insert many rows in few statements, without Django's per-value machinery.

`QuerySet.bulk_create` builds a model instance per row and runs every value through its
field's `get_db_prep_save` and the SQL compiler: about 400 µs a row on a loaded 2-core
machine, which alone caps ingest near 2,500 items/s. `insert_rows` takes plain tuples of
Python values, as the model's fields hold them (str, int, bool, None, aware datetime,
timedelta, UUID, JSON-able values), converts each column once per row with the same
backend operations Django uses (so what is stored, and what the ORM reads back, is the
same as bulk_create's), and sends them as multi-row INSERT statements, or on PostgreSQL
as a COPY (see _copy), ids and all.

Values must already be what the field holds: a CharField gets a str, an integer field an
int; nothing is cleaned, validated or defaulted, and no signal is sent. Columns left out
take the database's default, so name every column the model does not let the database
fill (Django has no database defaults unless `db_default` says so).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC
from operator import attrgetter
from typing import Any

import orjson
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.db.models import Model
from django.utils import timezone
from django.utils.duration import duration_microseconds

from core.json_values import all_finite

Convert = Callable[[Any], Any]
# Rows per INSERT statement: big enough that statement overhead vanishes, small enough
# that a statement stays well under the databases' parameter limits.
MAX_ROWS = 500


def insert_rows(
    model: type[Model],
    fields: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    returning: str | None = None,
    ignore_conflicts: bool = False,
    using: str = "default",
) -> list[Any]:
    """Insert *rows* (each a tuple of values for *fields*, attribute names such as
    `session_id`) into *model*'s table; returns the *returning* field's value of each row
    inserted as the database gives it (an auto id is an int), in the order of *rows*, or
    [] when *returning* is None. Both databases return the rows of a multi-row INSERT in
    the order of its VALUES, as Django's bulk_create also relies on.

    With *ignore_conflicts*, a row that conflicts with a unique constraint is skipped
    (ON CONFLICT DO NOTHING) and *returning* is not allowed: the returned values would no
    longer line up with *rows*.
    """
    if returning is not None and ignore_conflicts:
        raise ValueError("returning and ignore_conflicts do not go together")
    if not rows:
        return []
    connection = connections[using]
    # As Django's cursor does before every statement (COPY and sqlite3 straight skip it).
    connection.validate_no_broken_transaction()
    table, columns, converters = _plan(model, fields, connection)
    if any(len(row) != len(columns) for row in rows):
        raise ValueError(f"every row must have {len(columns)} values, one for each field")
    # Only the columns whose values need converting are touched, row by row.
    changed = [(index, convert) for index, convert in enumerate(converters) if convert != _as_is]
    if connection.vendor == "postgresql" and not ignore_conflicts:
        if returning is None:
            _copy(connection, table, columns, rows, changed)
            return []
        if model._meta.get_field(returning) is model._meta.pk and model._meta.pk.db_returning:
            return _copy_numbered(connection, table, columns, rows, changed, model._meta.pk)
    quote = connection.ops.quote_name
    head = f"INSERT INTO {quote(table)} ({', '.join(quote(c) for c in columns)}) VALUES "
    tail = " ON CONFLICT DO NOTHING" if ignore_conflicts else ""
    if returning is not None:
        tail += f" RETURNING {quote(model._meta.get_field(returning).column)}"
    size = max(1, min(MAX_ROWS, _max_params(connection) // len(columns)))
    returned: list[Any] = []
    with connection.cursor() as cursor:
        execute, placeholder = _executor(connection, cursor)
        one = "(" + ", ".join([placeholder] * len(columns)) + ")"
        statements: dict[int, str] = {}  # by rows: every full batch has the same
        for start in range(0, len(rows), size):
            batch = rows[start : start + size]
            params: list[Any] = []
            for row in _converted(batch, changed):
                params.extend(row)
            if (sql := statements.get(len(batch))) is None:
                sql = statements[len(batch)] = head + ", ".join([one] * len(batch)) + tail
            execute(sql, params)
            if returning is not None:
                returned.extend(value for (value,) in cursor.fetchall())
    return returned


def _executor(
    connection: BaseDatabaseWrapper, cursor: CursorWrapper
) -> tuple[Callable[[str, list[Any]], Any], str]:
    """How to run a statement on *cursor*, and its placeholder: the same whether or not
    queries are logged (DEBUG). On SQLite, Django turns every `%s` of a statement into `?`
    with a regular expression, which for a batch of 500 rows of 30 columns costs more
    than half of SQLite's own work with it: statements are written with `?` and given to
    sqlite3 straight, as Django's cursor would run them (see _as_django_runs)."""
    if connection.vendor != "sqlite":
        return cursor.execute, "%s"
    raw = cursor.cursor  # Django's sqlite3.Cursor subclass, which converts in execute()

    def straight(sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        with connection.wrap_database_errors:
            return sqlite3.Cursor.execute(raw, sql, params)

    def execute(sql: str, params: list[Any]) -> Any:
        # Logged in Django's `%s` form, which it fills in with the values it ran with.
        logged = sql.replace("?", "%s")  # no name or keyword of these statements has a ?
        return _as_django_runs(connection, cursor, straight, sql, params, logged=logged)

    return execute, "?"


def _as_django_runs(
    connection: BaseDatabaseWrapper,
    cursor: CursorWrapper,
    run: Callable[[str, Any, bool, dict[str, Any]], Any],
    sql: str,
    params: Any,
    *,
    logged: str | None = None,
) -> Any:
    """``run(sql, params, many, context)``, a statement given to the driver's cursor
    straight, wrapped as Django's cursor wraps the statements it runs: by the connection's
    execute wrappers (``connection.execute_wrapper``) and, when the cursor logs queries
    (DEBUG, CaptureQueriesContext), by a log entry: *logged* with the values filled in as
    Django fills its own in, or else *sql* as it is. So tests and tools see these
    statements as they see any other."""
    context = {"connection": connection, "cursor": cursor}
    for wrapper in reversed(connection.execute_wrappers):
        run = functools.partial(wrapper, run)
    if not isinstance(cursor, CursorDebugWrapper):
        return run(sql, params, False, context)
    fill_in = logged is not None
    with cursor.debug_sql(logged if fill_in else sql, params, use_last_executed_query=fill_in):
        return run(sql, params, False, context)


def _converted(
    rows: Sequence[Sequence[Any]], changed: list[tuple[int, Convert]]
) -> Iterator[Sequence[Any]]:
    if not changed:
        yield from rows
        return
    for row in rows:
        row = list(row)
        for index, convert in changed:
            row[index] = convert(row[index])
        yield row


def _copy(
    connection: BaseDatabaseWrapper,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    changed: list[tuple[int, Convert]],
) -> None:
    """PostgreSQL: the rows in one COPY, which the server takes as it would an INSERT
    (constraints, triggers, indexes) but without a statement to parse: psycopg's client-
    side binding, which Django uses, would otherwise quote every value into the text of
    each multi-row INSERT, and that alone costs more than the server's work."""
    quote = connection.ops.quote_name
    sql = f"COPY {quote(table)} ({', '.join(quote(c) for c in columns)}) FROM STDIN"

    def run(sql: str, params: None, many: bool, context: dict[str, Any]) -> None:
        # psycopg's own cursor: its errors are made Django's (an IntegrityError, ...) here.
        with connection.wrap_database_errors, cursor.cursor.copy(sql) as copy:
            for row in _converted(rows, changed):
                copy.write_row(row)

    with connection.cursor() as cursor:
        _as_django_runs(connection, cursor, run, sql, None)


def _copy_numbered(
    connection: BaseDatabaseWrapper,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    changed: list[tuple[int, Convert]],
    pk: Any,
) -> list[Any]:
    """PostgreSQL: _copy of rows that the database numbers; the numbers are taken from
    the primary key's own sequence first (in ascending order, as an INSERT of the rows
    would have given them) and returned in the order of *rows*."""
    with connection.cursor() as cursor:
        # The sequence is looked up once, in a subquery: called on each row, the lookup
        # cost the server more than the numbers did.
        cursor.execute(
            "SELECT nextval((SELECT pg_get_serial_sequence(%s, %s)::regclass))"
            " FROM generate_series(1, %s) ORDER BY 1",
            [connection.ops.quote_name(table), pk.column, len(rows)],
        )
        ids = [value for (value,) in cursor.fetchall()]
    numbered = [
        (pk_value, *row) for pk_value, row in zip(ids, _converted(rows, changed), strict=True)
    ]
    _copy(connection, table, [pk.column, *columns], numbered, [])
    return ids


def claim_rows(
    model: type[Model],
    fields: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    key: str,
    using: str = "default",
) -> set[Any]:
    """Insert the *rows* that conflict with no row already there (ON CONFLICT DO NOTHING);
    returns the *key* field's value of each row this call inserted, as the database gives
    it. Whoever inserted a row first owns it: a concurrent transaction inserting the same
    key waits for this one and then inserts nothing, so the caller may write what depends
    on its claimed rows without racing anyone."""
    if not rows:
        return set()
    connection = connections[using]
    table, columns, converters = _plan(model, fields, connection)
    quote = connection.ops.quote_name
    head = f"INSERT INTO {quote(table)} ({', '.join(quote(c) for c in columns)}) VALUES "
    key_field = model._meta.get_field(key)
    tail = f" ON CONFLICT DO NOTHING RETURNING {quote(key_field.column)}"
    # As the ORM reads it back (SQLite gives a UUID as its hex digits).
    to_python = (key_field.target_field if key_field.is_relation else key_field).to_python
    one = "(" + ", ".join(["%s"] * len(columns)) + ")"
    size = max(1, min(MAX_ROWS, _max_params(connection) // len(columns)))
    claimed: set[Any] = set()
    with connection.cursor() as cursor:
        for start in range(0, len(rows), size):
            batch = rows[start : start + size]
            params = [
                convert(value)
                for row in batch
                for convert, value in zip(converters, row, strict=True)
            ]
            cursor.execute(head + ", ".join([one] * len(batch)) + tail, params)
            claimed.update(to_python(value) for (value,) in cursor.fetchall())
    return claimed


def _plan(
    model: type[Model], fields: Sequence[str], connection: BaseDatabaseWrapper
) -> tuple[str, list[str], list[Convert]]:
    """The table, the columns and a converter per field."""
    by_attname = {field.attname: field for field in model._meta.concrete_fields}
    columns, converters = [], []
    for name in fields:
        field = by_attname.get(name) or model._meta.get_field(name)
        columns.append(field.column)
        converters.append(_converter(field, connection))
    return model._meta.db_table, columns, converters


def _converter(field: Any, connection: BaseDatabaseWrapper) -> Convert:
    """What Django's get_db_prep_save does to a plain value of *field*, as one function."""
    target = field.target_field if field.is_relation else field
    kind = target.get_internal_type()
    ops, features = connection.ops, connection.features
    if kind in _AS_IS:
        return _as_is
    if kind == "UUIDField":
        if features.has_native_uuid_field:
            return _as_is
        return _uuid_hex()
    if kind == "DateTimeField":
        if connection.vendor == "sqlite" and connection.timezone is UTC:
            return _sqlite_utc_text(ops.adapt_datetimefield_value)
        return ops.adapt_datetimefield_value
    if kind == "DurationField":
        if features.has_native_duration_field:
            return _as_is
        return _microseconds
    if kind == "JSONField":
        encoder = target.encoder

        def json_value(value: Any) -> Any:
            return None if value is None else ops.adapt_json_value(value, encoder)

        if encoder is not None:
            return json_value
        if connection.vendor == "postgresql":
            from django.db.backends.postgresql.psycopg_any import Jsonb

            return lambda value: None if value is None else Jsonb(value, dumps=_json_text)
        return lambda value: None if value is None else _json_text(value)

    def exact(value: Any) -> Any:  # any other field: Django's own way, slower
        return field.get_db_prep_save(value, connection)

    return exact


# Fields whose plain Python value (str, int, bool, None) is what the database gets.
_AS_IS = frozenset(
    {
        "AutoField",
        "BigAutoField",
        "BigIntegerField",
        "BooleanField",
        "CharField",
        "IntegerField",
        "PositiveBigIntegerField",
        "PositiveIntegerField",
        "PositiveSmallIntegerField",
        "SmallIntegerField",
        "TextField",
    }
)


def _as_is(value: Any) -> Any:
    return value


def _sqlite_utc_text(adapt: Convert) -> Convert:
    """*adapt* (SQLite's adapt_datetimefield_value on a connection in UTC), quicker for a
    time in UTC, which is how ingest hands times over: the same text, without the
    conversion to UTC that it does not need."""

    def convert(value: Any) -> Any:
        if value is not None and value.tzinfo is UTC:
            return value.isoformat(" ")[:-6]  # str() of it without "+00:00"
        return adapt(value)

    return convert


# Types orjson writes that json.dumps refuses: refused here too, so json says what it says.
_ORJSON_AS_JSON = (
    orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def _json_text(value: Any) -> str:
    """A JSONField's value as Django's json.dumps writes it for the database, in value:
    orjson's text, a few times quicker, reads back the same. What orjson would write
    otherwise (NaN and the infinities, as null) or refuses (integers past 64 bits, lone
    surrogates, keys that are no strings) is json's."""
    try:
        text = orjson.dumps(value, option=_ORJSON_AS_JSON)
    except TypeError:
        return json.dumps(value)
    if b"null" in text and not all_finite(value):
        return json.dumps(value)
    return text.decode()


def _uuid_hex() -> Convert:
    """A UUID as the hex digits SQLite keeps, remembering the last one: the rows of one
    insert (a file's items, its references) mostly share their session's."""
    last: list[Any] = [None, None]

    def convert(value: Any) -> Any:
        if value is not last[0]:
            last[:] = value, None if value is None else value.hex
        return last[1]

    return convert


def _microseconds(value: Any) -> Any:
    return None if value is None else duration_microseconds(value)


def _max_params(connection: BaseDatabaseWrapper) -> int:
    """How many parameters one statement may carry."""
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        try:
            return int(connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
        except AttributeError:  # Python before 3.11
            return 999
    return 65_535  # PostgreSQL's wire protocol counts parameters in 16 bits


def insert_objects(
    model: type[Model],
    objects: Sequence[Any],
    *,
    exclude: Sequence[str] = (),
    returning: str | None = None,
    ignore_conflicts: bool = False,
    using: str = "default",
) -> list[Any]:
    """insert_rows for objects that hold the model's fields as attributes (instances of
    the model, or objects of one class with those attribute names): one column for every
    concrete field but *exclude* (e.g. "id", for the database to number the rows). A
    field the objects have no attribute for takes the field's default (auto_now fields:
    now)."""
    if not objects:
        return []
    fields = [field for field in model._meta.concrete_fields if field.attname not in exclude]
    # The attributes the objects have are read in one C call per object; the fields they
    # lack come after them, with their defaults.
    kind = objects[0]
    present = [field.attname for field in fields if hasattr(kind, field.attname)]
    lacking = [field for field in fields if not hasattr(kind, field.attname)]
    now = timezone.now()
    defaults = tuple(
        now
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)
        else field.get_default()
        for field in lacking
    )
    names = [*present, *(field.attname for field in lacking)]
    read = _reader(present)
    rows = [read(obj) + defaults for obj in objects]
    return insert_rows(
        model,
        names,
        rows,
        returning=returning,
        ignore_conflicts=ignore_conflicts,
        using=using,
    )


def _reader(names: Sequence[str]) -> Callable[[Any], tuple[Any, ...]]:
    """A function that gives an object's attributes *names* as a tuple."""
    if len(names) >= 2:
        return attrgetter(*names)  # a tuple for two names or more
    if names:
        get = attrgetter(names[0])
        return lambda obj: (get(obj),)
    return lambda obj: ()
