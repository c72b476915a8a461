"""``schedsearch dashboard``: serve the read-only web dashboard of a results database."""

from __future__ import annotations

from schedsearch.cli.wiring import EXIT_USAGE, db_label, fail, open_db, stderr_console

#: What to install when the dashboard's libraries are missing.
INSTALL_HINT = "pip install 'schedsearch[dashboard]' (starlette, uvicorn and jinja2)"


def dashboard_command(db: str | None, host: str, port: int) -> None:
    """Open ``db`` read-only (a missing, damaged or foreign database is one line on stderr
    and exit 2, before anything listens), listen on ``host``:``port`` and serve until
    Ctrl-C."""
    try:
        from schedsearch.dashboard import server
    except ImportError as exc:
        fail(f"the dashboard needs libraries that are not installed ({exc}); {INSTALL_HINT}", EXIT_USAGE)
    store = open_db(db, create=False, read_only=True)
    try:
        try:
            sock = server.listen(host, port)
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}; pass another --port or --host", EXIT_USAGE)
        console = stderr_console()
        if not server.is_loopback(host):
            console.print(
                f"warning: listening on {host}: anyone who can reach this machine can read the results",
                highlight=False,
                markup=False,
            )

        def ready(url: str) -> None:
            console.print(
                f"schedsearch dashboard of {db_label(db)} (read-only) at {url}  (Ctrl-C stops it)",
                highlight=False,
                markup=False,
            )

        try:
            server.serve(store, sock, label=db_label(db), on_ready=ready)
        except KeyboardInterrupt:
            pass  # stopping is how a server ends
        finally:
            sock.close()
    finally:
        store.close()
