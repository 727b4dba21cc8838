"""A throwaway PostgreSQL server for tests: initdb into a directory, listen on 127.0.0.1 on a
free port, password login, print the URL. Any room's tests can use it:

    from assay.ledger import pgtest
    server = pgtest.start()                      # or pgtest.find_bindir() is None -> skip
    url = pgtest.create_database(server.url)     # a fresh database per test
    ...
    server.stop()

or from a shell: `python -m assay.ledger.pgtest start|stop|url [DIR]`
(scripts/pg-test-server.sh wraps this and installs PostgreSQL with apt when missing).

PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user.
Durability is switched off (fsync, synchronous_commit): this cluster holds nothing worth keeping.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

USER = "assay"
URL_FILE = "assay-url"


class PgTestError(RuntimeError):
    pass


def find_bindir() -> Path | None:
    """The newest installed server binaries (Debian keeps them off PATH)."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0,
    )
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(_as_server_user(cmd), capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise PgTestError(
            f"{' '.join(cmd[:2])} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-800:]}"
        )
    return proc


@dataclass
class Server:
    datadir: Path
    url: str
    bindir: Path
    owns_dir: bool = False

    def stop(self) -> None:
        stop(self.datadir, remove=self.owns_dir, bindir=self.bindir)


def start(datadir: str | Path | None = None, *, bindir: Path | None = None) -> Server:
    """Start a fresh cluster in `datadir` (must be absent or empty), or in a new /tmp dir."""
    bindir = bindir or find_bindir()
    if bindir is None:
        raise PgTestError("PostgreSQL server binaries not found: apt-get install postgresql")
    owns = datadir is None
    # Not under pytest's tmp dirs: those are 0700 root-owned, and the server user must reach it.
    base = Path(tempfile.mkdtemp(prefix="assay-pg-")) if owns else Path(datadir).absolute()
    base.mkdir(parents=True, exist_ok=True)
    if (base / URL_FILE).exists():
        raise PgTestError(f"{base} already holds a test cluster; stop it first")
    data, pwfile = base / "data", base / "pwfile"
    password = secrets.token_hex(12)
    pwfile.write_text(password + "\n")
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            raise PgTestError("PostgreSQL will not run as root and there is no 'postgres' user to run it as") from None
        for p in (base, pwfile):
            os.chown(p, pw.pw_uid, pw.pw_gid)
    base.chmod(0o700)
    port = _free_port()
    _run(
        [
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            USER,
            "--pwfile",
            str(pwfile),
            "-E",
            "UTF8",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--no-sync",
            "--no-instructions",
        ]
    )
    pwfile.unlink()
    opts = (
        f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={base} "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    _run(
        [str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(base / "server.log"), "-w", "-t", "60", "start"]
    )
    url = f"postgresql+psycopg://{USER}:{password}@127.0.0.1:{port}/{USER}"
    _run([str(bindir / "createdb"), "-h", str(base), "-p", str(port), "-U", USER, USER])
    (base / URL_FILE).write_text(url + "\n")
    return Server(base, url, bindir, owns)


def url_of(datadir: str | Path) -> str:
    f = Path(datadir) / URL_FILE
    if not f.exists():
        raise PgTestError(f"no test cluster in {datadir}")
    return f.read_text().strip()


def stop(datadir: str | Path, *, remove: bool = True, bindir: Path | None = None) -> None:
    base = Path(datadir).absolute()
    bindir = bindir or find_bindir()
    if (base / "data" / "postmaster.pid").exists() and bindir is not None:
        # No check: a server that already died must not stop the clean-up below.
        subprocess.run(
            _as_server_user([str(bindir / "pg_ctl"), "-D", str(base / "data"), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
        )
    if remove:
        # Only what start() made: DIR may be a folder the caller also uses.
        shutil.rmtree(base / "data", ignore_errors=True)
        for name in ("server.log", "pwfile", URL_FILE):
            (base / name).unlink(missing_ok=True)
        try:
            base.rmdir()
        except OSError:
            pass


def create_database(server_url: str, name: str | None = None) -> str:
    """A fresh, empty database on the server; returns its URL (the login needs CREATEDB)."""
    import psycopg
    import psycopg.sql
    import sqlalchemy as sa

    url = sa.make_url(server_url)
    name = name or f"t_{secrets.token_hex(6)}"
    with psycopg.connect(
        host=url.host,
        port=url.port or 5432,
        user=url.username,
        password=url.password,
        dbname=url.database,
        autocommit=True,
        connect_timeout=10,
    ) as conn:
        conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    return url.set(database=name).render_as_string(hide_password=False)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("start", "stop", "url"):
        print("usage: python -m assay.ledger.pgtest start|stop|url [DIR]", file=sys.stderr)
        return 2
    cmd, where = argv[0], (argv[1] if len(argv) > 1 else None)
    try:
        if cmd == "start":
            server = start(where)
            if where is None:
                print(
                    f"pg-test-server: cluster in {server.datadir}; stop it with: stop {server.datadir}", file=sys.stderr
                )
            print(server.url)
        elif where is None:
            print(f"{cmd} needs the DIR given to start", file=sys.stderr)
            return 2
        elif cmd == "url":
            print(url_of(where))
        else:
            stop(where)
    except PgTestError as exc:
        print(f"pg-test-server: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
