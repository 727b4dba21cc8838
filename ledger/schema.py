"""Opening a ledger database: URL checks, engines, tables and the append-only guards.

Every way this can fail because of the user's setup (a malformed URL, a directory that is
not there, a PostgreSQL that does not answer or refuses the login) becomes one `UserError`
naming the problem and the fix, and happens before anything is written: no empty SQLite
file is left behind by a failed open, and table creation is one transaction.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Generator, Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlmodel import SQLModel

from assay.errors import UserError
from assay.ledger.tables import table_of

# Arbitrary fixed keys for pg_advisory_xact_lock: one serializes schema set-up between
# processes opening the same database at once, the other serializes verdict appends.
SCHEMA_LOCK = 0x61737361_79000001
CHAIN_LOCK = 0x61737361_79000002

_URL_FIX = "use sqlite:////absolute/path/ledger.db or postgresql+psycopg://user:password@host:5432/dbname"


class NoLedger(UserError):
    """The URL is fine but no ledger was ever created there; readers may treat this gently."""


@dataclass(frozen=True)
class Engines:
    """`read` for queries; `write` for anything that writes. On SQLite `write` opens every
    transaction with BEGIN IMMEDIATE, so two writers queue on the busy timeout instead of
    one failing at commit; on PostgreSQL both are the same engine."""

    url: sa.URL
    read: sa.Engine
    write: sa.Engine

    @property
    def dialect(self) -> str:
        return self.url.get_backend_name()

    @property
    def display_url(self) -> str:
        return self.url.render_as_string(hide_password=True)

    def dispose(self) -> None:
        self.read.dispose()
        if self.write is not self.read:
            self.write.dispose()


def hide_password(raw: str) -> str:
    """A URL fit for an error message, even one too malformed to parse."""
    return re.sub(r"(://[^:/@]*:).*@", r"\1***@", raw)


def parse_url(raw: str) -> sa.URL:
    """Accept SQLite files and PostgreSQL through psycopg 3; name anything else."""
    try:
        url = sa.make_url(raw)
    except (sa_exc.ArgumentError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else "cannot be parsed"
        raise UserError(f"ledger URL {hide_password(raw)!r} is malformed ({first})", _URL_FIX) from None
    # From the text, not url.get_driver_name(): that imports the dialect, and an unknown
    # scheme must be a named problem, not an ImportError.
    backend, _, driver = url.drivername.partition("+")
    if backend in ("postgresql", "postgres"):
        if url.drivername not in ("postgresql", "postgres", "postgresql+psycopg"):
            raise UserError(f"ledger URL driver {url.drivername!r} is not supported", "use postgresql+psycopg://...")
        url = url.set(drivername="postgresql+psycopg")
        if not url.host and not url.query.get("host"):
            raise UserError(
                f"ledger URL {url.render_as_string()} names no host",
                "write it as postgresql+psycopg://user:password@host:5432/dbname",
            )
        if not url.database:
            raise UserError(f"ledger URL {url.render_as_string()} names no database", "add /dbname at the end")
        return url
    if backend == "sqlite":
        if driver not in ("", "pysqlite"):
            raise UserError(f"ledger URL driver {url.drivername!r} is not supported", "use sqlite:///path/ledger.db")
        if url.host or url.username or url.password or url.port:
            raise UserError(f"ledger URL {hide_password(raw)!r} is malformed (an SQLite URL has no host)", _URL_FIX)
        db = url.database or ""
        if db in ("", ":memory:") or url.query.get("mode") == "memory" or db.startswith("file:"):
            raise UserError(
                f"ledger URL {raw!r} is an in-memory or URI database, which would lose every record",
                "give a file: sqlite:////absolute/path/ledger.db",
            )
        return url.set(database=str(Path(db).expanduser().absolute()))
    raise UserError(f"ledger URL scheme {url.drivername!r} is not supported", _URL_FIX)


def _check_sqlite_path(url: sa.URL, create: bool) -> None:
    assert url.database, "parse_url gives every SQLite URL a file path"
    path = Path(url.database)
    parent = path.parent
    if path.exists():
        if not path.is_file():
            raise UserError(f"ledger path {path} is not a file", "point the ledger URL at a file")
        return
    if not create:
        raise NoLedger(
            f"no ledger at {path} (nothing has been recorded there yet)",
            "check ASSAY_HOME or --url; a ledger is created by the first run",
        )
    if not parent.is_dir():
        raise UserError(f"ledger directory {parent} does not exist", f"create it: mkdir -p {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"ledger directory {parent} is not writable", "choose a writable ASSAY_HOME or ledger URL")


def _sqlite_engines(url: sa.URL) -> Engines:
    def make(begin: str) -> sa.Engine:
        # timeout is the busy timeout: writers wait their turn rather than fail.
        engine = sa.create_engine(url, connect_args={"timeout": 60})

        @event.listens_for(engine, "connect")
        def _connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves, below
            dbapi_conn.execute("PRAGMA foreign_keys=ON")
            # In WAL mode, NORMAL syncs at checkpoints, not on every commit: a killed process
            # loses nothing it committed (the WAL is in the file system); only a power cut can
            # drop the last commits. That trade keeps the gateway's audit writes off fsync.
            dbapi_conn.execute("PRAGMA synchronous=NORMAL")

        @event.listens_for(engine, "begin")
        def _begin(conn: sa.Connection) -> None:
            conn.exec_driver_sql(begin)

        return engine

    return Engines(url, make("BEGIN"), make("BEGIN IMMEDIATE"))


def _pg_engines(url: sa.URL) -> Engines:
    engine = sa.create_engine(
        url,
        pool_pre_ping=True,
        connect_args={"connect_timeout": 5, "application_name": "assay-ledger"},
    )
    return Engines(url, engine, engine)


def open_engines(raw_url: str, *, create: bool) -> Engines:
    url = parse_url(raw_url)
    if url.get_backend_name() == "sqlite":
        _check_sqlite_path(url, create)
        engines = _sqlite_engines(url)
    else:
        engines = _pg_engines(url)
    try:
        with user_facing(engines), engines.read.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except BaseException:
        engines.dispose()
        raise
    return engines


@contextmanager
def user_facing(engines: Engines) -> Generator[None]:
    """Errors from the database itself (not from a caller's bad row) become a UserError."""
    try:
        yield
    except sa_exc.IntegrityError:
        raise
    except (sa_exc.DBAPIError, sqlite3.Error) as exc:
        raise database_error(engines, exc) from None


def database_error(engines: Engines, exc: Exception) -> UserError:
    """Turn a driver's complaint about the database itself into a problem and a fix."""
    orig = getattr(exc, "orig", None) or exc
    text = str(orig)
    low = text.lower()
    where = engines.display_url
    if engines.dialect == "sqlite":
        if "not a database" in low:
            return UserError(
                f"{engines.url.database} is not an SQLite ledger (file is not a database)",
                "point the ledger URL at a ledger file, or move that file away",
            )
        if "readonly" in low or "unable to open" in low:
            return UserError(
                f"cannot write the ledger at {engines.url.database} ({text.splitlines()[0]})",
                "choose a writable ASSAY_HOME or ledger URL",
            )
        if "locked" in low:
            return UserError(
                f"ledger {engines.url.database} stayed locked by another process",
                "retry when the other assay process has finished",
            )
        return UserError(
            f"ledger {engines.url.database}: {text.splitlines()[0]}",
            "check the file, or point the ledger URL elsewhere",
        )
    host = f"{engines.url.host}:{engines.url.port or 5432}"
    if "password authentication failed" in low or "no password supplied" in low or "authentication failed" in low:
        return UserError(
            f"PostgreSQL at {host} refused the login for user {engines.url.username!r}",
            "check the user and password in the ledger URL",
        )
    if "does not exist" in low and "database" in low:
        return UserError(
            f"PostgreSQL at {host} has no database {engines.url.database!r}",
            f"create it: createdb {engines.url.database}",
        )
    if (
        "connection refused" in low
        or "could not connect" in low
        or "timeout expired" in low
        or "translate host name" in low
        or "name or service not known" in low
    ):
        return UserError(
            f"cannot reach PostgreSQL at {host} ({_reason(text)})",
            "start the server, or fix the host and port in the ledger URL",
        )
    return UserError(f"PostgreSQL ledger {where}: {_reason(text)}", "check the server and the ledger URL")


def _reason(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        for marker in ("Connection refused", "timeout expired", "FATAL:", "could not translate host name"):
            if marker in ln:
                return ln[ln.index(marker) :].replace("FATAL:  ", "").strip()
    return lines[0] if lines else "unknown error"


# --- tables and guards --------------------------------------------------------------------

_PG_GUARD_FN = """
CREATE OR REPLACE FUNCTION assay_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'assay ledger: % on % refused, the table is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END $$
"""


def guard_names(dialect: str, table: str) -> list[str]:
    if dialect == "sqlite":
        return [f"{table}_no_update", f"{table}_no_delete"]
    return [f"{table}_append_only", f"{table}_no_truncate"]


def _install_guards(conn: sa.Connection, table: str) -> None:
    """Triggers that refuse UPDATE and DELETE (and TRUNCATE, which skips row triggers)."""
    if conn.dialect.name == "sqlite":
        for name, op in zip(guard_names("sqlite", table), ("UPDATE", "DELETE"), strict=False):
            conn.exec_driver_sql(
                f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE {op} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'assay ledger: {op} on {table} refused, the table is append-only'); END"
            )
        return
    existing = set(
        conn.execute(
            sa.text("SELECT tgname FROM pg_trigger WHERE tgrelid = CAST(:t AS regclass)"), {"t": table}
        ).scalars()
    )
    row_guard, trunc_guard = guard_names("postgresql", table)
    if row_guard not in existing:
        conn.exec_driver_sql(
            f"CREATE TRIGGER {row_guard} BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION assay_append_only()"
        )
    if trunc_guard not in existing:
        conn.exec_driver_sql(
            f"CREATE TRIGGER {trunc_guard} BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION assay_append_only()"
        )


def ensure_tables(
    engines: Engines, models: Iterable[type[SQLModel]], append_only: Iterable[type[SQLModel]] = ()
) -> None:
    """Create what is missing, in one transaction, one process at a time."""
    tables = [table_of(m) for m in models]
    guarded = [table_of(m).name for m in append_only]
    with user_facing(engines):
        if engines.dialect == "sqlite":
            raw = engines.write.raw_connection()
            try:
                # WAL lets readers (the TUI, verify) run while a run is writing; it is a
                # property of the file, so setting it once is enough.
                driver = raw.driver_connection
                assert driver is not None  # an open connection
                driver.execute("PRAGMA journal_mode=WAL")
            finally:
                raw.close()
        with engines.write.begin() as conn:
            if engines.dialect == "postgresql":
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": SCHEMA_LOCK})
                if guarded:
                    conn.execute(sa.text(_PG_GUARD_FN))  # text(): psycopg would read the % as placeholders
            SQLModel.metadata.create_all(conn, tables=tables, checkfirst=True)
            for name in guarded:
                _install_guards(conn, name)


def has_table(engines: Engines, name: str) -> bool:
    with user_facing(engines), engines.read.connect() as conn:
        return sa.inspect(conn).has_table(name)


def present_guards(engines: Engines, tables: Iterable[str]) -> dict[str, bool]:
    names = {t: guard_names(engines.dialect, t) for t in tables}
    with user_facing(engines), engines.read.connect() as conn:
        if engines.dialect == "sqlite":
            found = set(conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type='trigger'").scalars())
        else:
            found = set(conn.exec_driver_sql("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal").scalars())
    return {t: all(n in found for n in ns) for t, ns in names.items()}
