"""Serving the dashboard: open the database read-only, listen, run uvicorn until stopped."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable

import uvicorn

from schedsearch.core import Store
from schedsearch.dashboard.routes import create_app

#: Host headers answered when listening on a loopback address.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (port 0: any free one). Raises OSError (the
    port is taken, the address is not this machine's) before anything is served."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    """The address a browser opens for ``sock``."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(store: Store, sock: socket.socket, *, label: str, on_ready: Callable[[str], None] | None = None) -> None:
    """Answer requests on ``sock`` until interrupted. ``store`` must be open (read-only);
    the caller closes it afterwards. ``on_ready`` is told the URL just before serving."""
    host = sock.getsockname()[0]
    hosts = LOOPBACK_NAMES if is_loopback(host) else ("*",)
    app = create_app(store, label=label, allowed_hosts=hosts)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", proxy_headers=False, server_header=False
    )
    if on_ready is not None:
        on_ready(url_of(sock))
    uvicorn.Server(config).run(sockets=[sock])
