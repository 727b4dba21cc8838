"""Bad input through the real CLI: one clear line on stderr, exit 2, no traceback, and
nothing half-written where the ledger would have been."""

from __future__ import annotations

import socket

import pytest
import sqlalchemy as sa

from assay.errors import UserError
from assay.ledger import Ledger


def assert_one_line_error(res, *words: str) -> str:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    err = res.stderr.strip()
    assert "Traceback" not in res.stderr
    assert "\n" not in err, err
    assert err.startswith("assay: error: ") and "(fix: " in err, err
    for w in words:
        assert w in err, err
    return err


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nobody listens once the socket is closed


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("postgresql+psycopg://u:s3cret@host:99x/db", ["malformed"]),
        ("::not a url::", ["malformed"]),
        ("mysql://u@localhost/db", ["scheme 'mysql' is not supported"]),
        ("postgresql+psycopg2://u@localhost/db", ["driver", "not supported", "postgresql+psycopg"]),
        ("sqlite+aiosqlite:///x.db", ["driver", "not supported"]),
        ("sqlite://", ["in-memory"]),
        ("sqlite:///:memory:", ["in-memory"]),
        ("postgresql+psycopg://u:s3cret@127.0.0.1:5432", ["names no database"]),
        ("postgresql+psycopg:///db", ["names no host"]),
    ],
)
def test_malformed_or_unsupported_urls(cli, tmp_path, url, words):
    res = cli("ledger", "init", "--url", url, env={"ASSAY_HOME": str(tmp_path / "home")})
    err = assert_one_line_error(res, *words)
    assert "s3cret" not in err
    assert not (tmp_path / "home").exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["verify", "info"])
def test_readers_reject_bad_urls_too(cli, command):
    assert_one_line_error(cli("ledger", command, "--url", "mysql://u@localhost/db"), "not supported")
    err = assert_one_line_error(cli("ledger", command, "--url", "postgresql+psycopg://u:s3cret@h:x/db"), "malformed")
    assert "s3cret" not in err


def test_unreachable_postgresql(cli):
    port = closed_port()
    res = cli("ledger", "init", "--url", f"postgresql+psycopg://assay:s3cret@127.0.0.1:{port}/assay")
    err = assert_one_line_error(
        res, f"cannot reach PostgreSQL at 127.0.0.1:{port}", "Connection refused", "start the server"
    )
    assert "s3cret" not in err


@pytest.mark.postgres
def test_wrong_password_and_missing_database(cli, pg_url):
    url = sa.make_url(pg_url)
    wrong = url.set(password="wrong-password").render_as_string(hide_password=False)
    err = assert_one_line_error(
        cli("ledger", "init", "--url", wrong), "refused the login", "check the user and password"
    )
    assert "wrong-password" not in err and url.password not in err

    missing = url.set(database="no_such_db").render_as_string(hide_password=False)
    assert_one_line_error(
        cli("ledger", "verify", "--url", missing), "has no database 'no_such_db'", "createdb no_such_db"
    )

    # A reader pointed at an empty database says so and creates nothing there.
    assert_one_line_error(cli("ledger", "verify", "--url", pg_url), "no assay ledger in")
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:
        assert sa.inspect(conn).get_table_names() == []
    engine.dispose()


def test_unwritable_assay_home(cli, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    home = blocker / "home"  # under a regular file: no user, root included, can create it
    res = cli("ledger", "init", env={"ASSAY_HOME": str(home)})
    assert_one_line_error(res, f"ASSAY_HOME {home} is not writable", "set ASSAY_HOME")
    assert blocker.read_text() == ""

    monkeypatch.setenv("ASSAY_HOME", str(home))
    from assay.settings import settings

    settings.cache_clear()
    with pytest.raises(UserError, match="not writable"):
        Ledger.open()


def test_missing_sqlite_directory_is_not_created(cli, tmp_path):
    target = tmp_path / "nope" / "deeper" / "ledger.db"
    assert_one_line_error(cli("ledger", "init", "--url", f"sqlite:///{target}"), "does not exist", "mkdir -p")
    assert not (tmp_path / "nope").exists()


def test_readers_create_no_file(cli, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    assert_one_line_error(cli("ledger", "verify", env={"ASSAY_HOME": str(home)}), "no ledger at", "ledger.db")
    res = cli("ledger", "info", env={"ASSAY_HOME": str(home)})
    assert res.returncode == 0 and "no ledger at" in res.stdout
    assert list(home.iterdir()) == []


def test_a_file_that_is_not_a_ledger_is_left_alone(cli, tmp_path):
    junk = tmp_path / "notes.db"
    junk.write_bytes(b"these are my notes, not a database " * 40)
    before = junk.read_bytes()
    for command in ("init", "verify", "info"):
        assert_one_line_error(cli("ledger", command, "--url", f"sqlite:///{junk}"), "not an SQLite ledger")
    assert junk.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_init_then_info_and_help(cli, tmp_path):
    home = tmp_path / "home"
    env = {"ASSAY_HOME": str(home)}
    res = cli("ledger", "init", env=env)
    assert res.returncode == 0 and "ledger ready: sqlite:///" in res.stdout
    res = cli("ledger", "info", env=env)
    assert res.returncode == 0
    assert "rows: runs 0, steps 0, tool_calls 0, policy_decisions 0, verdicts 0" in res.stdout
    assert "append-only triggers: in place" in res.stdout
    for args in (
        ["ledger", "--help"],
        ["ledger", "init", "--help"],
        ["ledger", "verify", "--help"],
        ["ledger", "info", "--help"],
    ):
        res = cli(*args)
        assert res.returncode == 0 and "Usage" in res.stdout, args


def test_a_failed_first_open_leaves_no_empty_file(tmp_path, monkeypatch):
    import assay.ledger.store as store

    def broken(*_a, **_k):
        raise UserError("simulated failure while creating tables")

    monkeypatch.setattr(store, "ensure_tables", broken)
    with pytest.raises(UserError, match="simulated"):
        Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}")
    assert list(tmp_path.iterdir()) == []
