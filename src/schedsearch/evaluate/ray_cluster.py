"""This process's connection to Ray: joining a running cluster (``--address``) or starting
a private one, and shutting down what it started.

Joining: ``address`` is the GCS's ``host:port`` (``auto``: the running cluster's), probed
first so that a wrong address fails within seconds, then ``ray.init`` with a deadline.
Starting: ``ray.init(address="local")`` with SIGTERM left to the caller, and beside it the
``watchdog`` program, which kills whatever remains of the cluster as soon as this driver
is gone (Ray's agents outlive a driver killed with SIGKILL for a minute or more). Broken
infrastructure raises ``ClusterError``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from schedsearch.core import BenchConfig, MachineInfo
from schedsearch.errors import ClusterError

_PROBE_TIMEOUT = 3.0
_MACHINE_TIMEOUT = 120.0

#: The watchdog program, run by path (``watchdog``): standard library only.
WATCHDOG = Path(__file__).with_name("watchdog.py")


def _resolve_address(address: str) -> tuple[str, int]:
    """``host:port`` of the cluster's GCS; ``auto`` reads the running cluster's file."""
    text = address.strip()
    if text.startswith("ray://"):
        raise ClusterError(f"Ray client addresses are not supported ({address}); give the GCS host:port")
    if text == "auto":
        text = os.environ.get("RAY_ADDRESS", "")
        if not text:
            try:
                text = Path("/tmp/ray/ray_current_cluster").read_text().strip()
            except OSError:
                raise ClusterError(
                    "no running Ray cluster found for --address auto; start one with "
                    "`ray start --head` or give host:port"
                ) from None
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ClusterError(f"cannot read Ray address {address!r}; expected host:port (e.g. 10.0.0.5:6379)")
    return host, int(port)


def _probe(host: str, port: int, timeout: float) -> None:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as e:
        raise ClusterError(
            f"no Ray cluster answers at {host}:{port} ({e.strerror or e}); "
            "check --address or start one with `ray start --head`"
        ) from None


def _use_token_auth_when_available() -> None:
    """Send our Ray token when joining an existing cluster.

    Ray 2.60 turns token authentication on for clusters started with ``ray start``, but a
    driver joining one is only let in when ``RAY_AUTH_MODE=token`` was in its environment
    before ray was imported; otherwise it retries until it times out. When the user has a
    token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``) and has not
    chosen a mode, use it.
    """
    if "RAY_AUTH_MODE" in os.environ:
        return
    has_token = bool(os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"))
    if has_token or (Path.home() / ".ray" / "auth_token").is_file():
        os.environ["RAY_AUTH_MODE"] = "token"


def _init_with_deadline(timeout: float, **kwargs: Any) -> None:
    """``ray.init`` in a helper thread, so an unresponsive cluster cannot hang us for minutes.
    Only to connect to a running cluster: a local one started off the main thread leaves
    its driver waiting a minute at exit for the GCS that ``ray.shutdown`` stopped."""
    import ray

    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            ray.init(**kwargs)
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            outcome.append(e)

    thread = threading.Thread(target=target, name="schedsearch-ray-connect", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise ClusterError(
            f"timed out after {timeout:.0f} s connecting to the Ray cluster at {kwargs.get('address')}; "
            "if it uses token authentication, set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to its token"
        )
    if outcome and outcome[0] is not None:
        err = outcome[0]
        raise ClusterError(
            f"cannot connect to the Ray cluster at {kwargs.get('address')}: {type(err).__name__}: {err}"
        ) from err


@contextlib.contextmanager
def _sigterm_left_to_caller() -> Iterator[None]:
    """Keep ``ray.init`` from installing its SIGTERM handler (``sys.exit(15)``) while it
    starts a private cluster. Raised in the middle of the start, that exit left a driver that
    shut down cleanly and then crashed at exit (SIGSEGV) now and then; the caller's handler
    instead asks for a stop, and the start is shut down once it is complete. Ray installs it
    through ``ray._private.utils.set_sigterm_handler``: where that is missing (another Ray),
    nothing is changed, and only after the start is the caller's handler put back."""
    from ray._private import utils

    install = getattr(utils, "set_sigterm_handler", None)
    if install is None:
        yield
        return
    utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        utils.set_sigterm_handler = install


def _quiet_kwargs() -> dict[str, Any]:
    return {
        "log_to_driver": False,
        "logging_level": logging.ERROR,
        "include_dashboard": False,
        "namespace": "schedsearch",
    }


class RayCluster:
    """The Ray connection of one executor. ``owns_ray``: this connection started a private
    cluster, which ``close`` shuts down (and then tells the watchdog to sweep up after it).
    A connection joined or found already open is left open by ``close``."""

    def __init__(self) -> None:
        self.owns_ray = False
        self._watchdog: subprocess.Popen[bytes] | None = None

    def connect(self, address: str | None, timeout: float, workers: int, stop: threading.Event | None = None) -> None:
        """Join the cluster at ``address``, or start a private one of ``workers`` CPUs (unless
        this process is connected already). ``stop`` set while a private cluster starts:
        ``KeyboardInterrupt`` once ``ray.init`` returns (``close`` then shuts it down)."""
        if address is not None:
            # Before ray is imported: its core library reads the auth mode when it loads.
            _use_token_auth_when_available()
        else:
            # Before ray is imported too (it reads this then): Ray's C++ failure handler
            # would print a stack trace over the user's terminal for a SIGTERM that lands
            # while this driver connects to its private cluster, and abort. The search's own
            # faults come back as data, and the CLI has Python's faulthandler.
            os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
        import ray

        if address is not None:
            # Probe first, even when already connected: a wrong address must not pass silently.
            host, port = _resolve_address(address)
            _probe(host, port, min(timeout, _PROBE_TIMEOUT))
            if not ray.is_initialized():
                _init_with_deadline(timeout, address=f"{host}:{port}", **_quiet_kwargs())
            return
        if ray.is_initialized():
            return
        # The watchdog first: a driver stopped while the cluster starts must not leave
        # Ray's processes behind (``close`` shuts down what started, the watchdog the rest).
        self.owns_ray = True
        self._start_watchdog(os.path.dirname(ray.__file__))
        main = threading.current_thread() is threading.main_thread()
        ours = signal.getsignal(signal.SIGTERM) if main else None
        ours = signal.SIG_DFL if ours is None else ours
        try:
            with _sigterm_left_to_caller():
                ray.init(address="local", num_cpus=workers, **_quiet_kwargs())
        except Exception as e:  # a local start can fail in many ways
            raise ClusterError(f"cannot start a local Ray cluster: {type(e).__name__}: {e}") from e
        finally:
            if main:
                signal.signal(signal.SIGTERM, ours)  # the caller's, whatever ray.init set
        if stop is not None and stop.is_set():
            raise KeyboardInterrupt  # stopped while the cluster started: nothing more is started

    def cpus(self) -> int:
        """The CPUs of the cluster's nodes (0 when Ray cannot say)."""
        import ray

        with contextlib.suppress(Exception):
            return int(ray.cluster_resources().get("CPU", 0))
        return 0

    def machine(self, bench: BenchConfig, query: Any) -> MachineInfo:
        """The measuring setup for ``bench`` as the cluster's workers see it. A private
        cluster's workers are processes of this machine with this environment: asking one
        would only wait for a worker to start, so it is read here; a joined cluster's are
        asked, with ``query`` (the remote ``ray_worker._machine_task``)."""
        import ray

        if self.owns_ray:
            from schedsearch.evaluate import machine_info

            return machine_info(bench)
        try:
            return cast(MachineInfo, ray.get(query.remote(bench), timeout=_MACHINE_TIMEOUT))
        except ray.exceptions.RayError as e:
            lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
            raise ClusterError(f"cannot query the Ray workers' machine: {lines[-1][:300] if lines else e}") from e

    def _start_watchdog(self, marker: str) -> None:
        if not sys.platform.startswith("linux"):
            return  # the watchdog reads /proc
        self._watchdog = subprocess.Popen(
            [sys.executable, "-I", str(WATCHDOG), str(os.getpid()), marker],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def close(self) -> None:
        """Shut down the private cluster this connection started, then let the watchdog
        sweep up what the shutdown left behind. Idempotent; a joined cluster is left alone."""
        if self.owns_ray:
            import ray

            with contextlib.suppress(Exception):  # a start cut short leaves Ray half up
                ray.shutdown()
        if self._watchdog is not None:
            # EOF tells the watchdog to sweep up anything the shutdown left behind.
            if self._watchdog.stdin is not None:
                self._watchdog.stdin.close()
            try:
                self._watchdog.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._watchdog.kill()
            self._watchdog = None
