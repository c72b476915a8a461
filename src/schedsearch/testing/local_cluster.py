"""A Ray cluster of several nodes on this one machine, started the way a user starts a real
one (``ray start``, one raylet per node), for tests and benchmarks of a search that spans
nodes. It runs the ``ray`` program and never imports ray.

Each worker node gets, where the machine allows it (root, ``ip netns``, ``unshare``):

- its own **network namespace**, joined to the head's by a veth pair, so it has an address
  of its own and reaches the head over a link, as a second machine would;
- its own **PID and mount namespaces**, so that ``kill`` ends every process of the node at
  once - raylet, workers, compilers, kernels - as a machine that loses power does, and its
  own host name (``<this host>-<name>``);

else (``Isolation.LOOPBACK``) it shares the head's loopback address with ports of its own,
and ``kill`` ends the processes started in the node's session. Either way each node has
its own Ray temporary directory and its own schedsearch cache directory
(``SCHEDSEARCH_CACHE_DIR``), as nodes with local disks do: a kernel built on one node exists
only in that node's cache. A node may be given cores of its own (``cores``): its raylet and
every process it starts - workers, compilers, kernels - run on those alone, as on a machine
of that many cores. The addresses used are those of the veth pair this module
makes, inside namespaces it made; nothing else on the network is touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Self

#: The second octets a cluster's addresses may use, ``10.<net>.<node index>.<1: head side, 2: node side>``:
#: each cluster takes the first one no other cluster on this machine holds (tests run in parallel).
_NETS = range(231, 251)
_START_TIMEOUT = 90.0


class Isolation(StrEnum):
    """How a worker node is kept apart from the head on this machine."""

    NETNS = "netns"  # own network, PID and mount namespaces; an address of its own over a veth pair
    LOOPBACK = "loopback"  # the same network as the head (127.0.0.1), ports of its own


@dataclass(slots=True)
class LocalNode:
    """One ``ray start`` of the cluster. ``address`` is the node's IP as Ray knows it."""

    name: str
    address: str
    temp_dir: Path
    cache_dir: Path
    process: subprocess.Popen[bytes]
    netns: str | None = None
    killed: bool = False


@dataclass(slots=True)
class LocalCluster:
    """A head node and worker nodes on this machine; ``close`` stops them all and removes
    every namespace, link and directory made here (also after a failed start)."""

    isolation: Isolation
    root: Path
    ray_program: Path
    head: LocalNode | None = None
    nodes: list[LocalNode] = field(default_factory=list)
    port: int = 0
    net: int = 0  # the second octet of this cluster's addresses (``_NETS``)
    _links: list[str] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        head_cpus: int,
        isolation: Isolation | None = None,
        ray_program: Path | None = None,
        head_cores: frozenset[int] | None = None,
    ) -> Self:
        """Start a head node with ``head_cpus`` CPUs (on ``head_cores`` alone, when given).
        ``isolation`` None: network namespaces when ``netns_available()``, else loopback."""
        chosen = isolation or (Isolation.NETNS if netns_available() else Isolation.LOOPBACK)
        # Short: Ray's socket paths under its temporary directory must fit in 107 bytes.
        root = Path(tempfile.mkdtemp(prefix="sscl", dir="/tmp"))
        program = ray_program or Path(sys.executable).with_name("ray")
        cluster = cls(chosen, root, program)
        try:
            cluster._start_head(head_cpus, head_cores)
        except BaseException:
            cluster.close()
            raise
        return cluster

    @property
    def address(self) -> str:
        """The GCS address to give ``schedsearch run --address``."""
        assert self.head is not None
        return f"{self.head.address}:{self.port}"

    def _start_head(self, cpus: int, cores: frozenset[int] | None) -> None:
        if self.isolation is Isolation.NETNS:
            host = self._link(0)
        else:
            host = "127.0.0.1"
        self.port = _free_port(host)
        self.head = self._ray_start(
            "head",
            host,
            cpus,
            ["--head", f"--port={self.port}", "--include-dashboard=false"],
            netns=None,
            wait_for=(host, self.port),
            cores=cores,
        )

    def add_node(self, name: str, cpus: int, cores: frozenset[int] | None = None) -> LocalNode:
        """Start a worker node with ``cpus`` CPUs (on ``cores`` alone, when given) that joins
        the head; returns once it runs (registered with the head: ``wait_for_nodes``)."""
        index = len(self.nodes) + 1
        netns = None
        if self.isolation is Isolation.NETNS:
            netns = f"sscl{os.getpid()}n{index}"
            self._link(index, netns)
            address = f"10.{self.net}.{index}.2"
        else:
            address = "127.0.0.1"
        node = self._ray_start(name, address, cpus, [f"--address={self.address}"], netns=netns, cores=cores)
        self.nodes.append(node)
        return node

    def _link(self, index: int, netns: str | None = None) -> str:
        """A veth pair ``10.net.index.1`` (head side) - ``.2`` (in ``netns``); the head side's address."""
        host_if, node_if = f"sscl{os.getpid() % 100000}h{index}", f"sscl{os.getpid() % 100000}n{index}"
        if netns is None:
            # The head's own address, on this namespace's loopback (one /32, removed by
            # ``close``): every node reaches it through its veth's default route. The first
            # net whose address no other cluster holds (adding one that exists fails).
            for net in _NETS:
                if _ip("addr", "add", f"10.{net}.0.1/32", "dev", "lo", check=False):
                    self.net = net
                    self._links.append(f"lo:10.{net}.0.1/32")
                    return f"10.{net}.0.1"
            raise RuntimeError(f"every net 10.{_NETS[0]}-{_NETS[-1]}.0.1 is taken on this machine's loopback")
        host = f"10.{self.net}.{index}.1"
        _ip("netns", "add", netns)
        self._links.append(f"netns:{netns}")
        _ip("link", "add", host_if, "type", "veth", "peer", "name", node_if)
        self._links.append(host_if)
        _ip("link", "set", node_if, "netns", netns)
        _ip("addr", "add", f"{host}/24", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", netns, "addr", "add", f"10.{self.net}.{index}.2/24", "dev", node_if)
        _ip("-n", netns, "link", "set", node_if, "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        # The head listens on 10.net.0.1 (on the host's loopback): reach it through the veth.
        _ip("-n", netns, "route", "add", "default", "via", host)
        return host

    def _ray_start(
        self,
        name: str,
        address: str,
        cpus: int,
        extra: list[str],
        netns: str | None,
        wait_for: tuple[str, int] | None = None,
        cores: frozenset[int] | None = None,
    ) -> LocalNode:
        temp = self.root / name
        cache = self.root / f"{name}-cache"
        temp.mkdir()
        cache.mkdir()
        argv = [
            str(self.ray_program),
            "start",
            *extra,
            f"--node-ip-address={address}",
            f"--num-cpus={cpus}",
            # Tells the nodes apart in ``ray.nodes()`` (``node_ids``).
            f"--resources={json.dumps({f'node_{name}': 1})}",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
            "--block",
        ]
        if netns is not None:
            # Its own PID namespace (``kill`` ends all of it at once) with its own /proc, for
            # Ray's process checks, in its own network namespace, under a host name of its own
            # (``<this host>-<name>``: the machine each measurement names says which node).
            unshare = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--uts"]
            named = ["sh", "-c", 'hostname "$0" && exec "$@"', f"{socket.gethostname()}-{name}"]
            argv = ["ip", "netns", "exec", netns, *unshare, *named, *argv]
        env = {**os.environ, "SCHEDSEARCH_CACHE_DIR": str(cache)}
        if name != "head" and _has_token() and "RAY_AUTH_MODE" not in env:
            # A head started with ``ray start`` asks for its token (Ray 2.60's default, the
            # token written when it started); a joining node sends it only in this mode.
            env["RAY_AUTH_MODE"] = "token"
        log = (self.root / f"{name}.log").open("wb")
        # Every process of the node inherits the affinity of its first.
        pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env, preexec_fn=pin
        )
        log.close()
        node = LocalNode(name, address, temp, cache, proc, netns)
        if name == "head":
            self.head = node
        if wait_for is not None:
            _wait_for_port(*wait_for, proc, self.root / f"{name}.log")
        return node

    def wait_for_nodes(self, count: int, timeout: float = _START_TIMEOUT) -> dict[str, str]:
        """Wait until ``count`` nodes are alive; their Ray node ids by name (``node_ids``)."""
        deadline = time.monotonic() + timeout
        ids: dict[str, str] = {}
        while time.monotonic() < deadline:
            ids = self.node_ids()
            if len(ids) >= count:
                return ids
            time.sleep(1.0)
        raise TimeoutError(f"only {sorted(ids)} of {count} Ray nodes came up; see the logs in {self.root}")

    def node_ids(self) -> dict[str, str]:
        """The alive nodes' Ray node ids, by the name they were started with (asked of the
        cluster by a short-lived driver of its own)."""
        script = (
            f"import json, ray; ray.init(address={self.address!r}, log_to_driver=False, include_dashboard=False);"
            "print('NODES', json.dumps({k[5:]: n['NodeID'] for n in ray.nodes() if n['Alive']"
            " for k in n['Resources'] if k.startswith('node_') and not k.startswith('node:')}))"
        )
        env = {**os.environ, "RAY_AUTH_MODE": "token"} if _has_token() else dict(os.environ)
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env, check=False
        )
        if out.returncode != 0:
            raise RuntimeError(f"cannot list the Ray nodes: {out.stderr.strip()[-500:]}")
        # Ray may print on stdout too (a dead node's notice): the answer is the marked line.
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith("NODES ")), None)
        if line is None:
            raise RuntimeError(f"cannot list the Ray nodes: {out.stdout.strip()[-500:]}")
        return dict(json.loads(line[len("NODES ") :]))

    def kill(self, node: LocalNode) -> None:
        """End every process of ``node`` at once with SIGKILL, as a machine that loses power:
        nothing of it says goodbye to the head."""
        node.killed = True
        with contextlib.suppress(ProcessLookupError):
            if node.netns is not None:
                # ``unshare --kill-child``: its child is the PID namespace's first process;
                # when that dies the kernel kills the whole namespace.
                node.process.kill()
            else:
                os.killpg(node.process.pid, signal.SIGKILL)
        _kill_session(node)
        node.process.wait(timeout=30)

    def close(self) -> None:
        """Stop every node (worker nodes first, then the head), remove the namespaces, links
        and directories. Idempotent; best effort for whatever a failed start left half made."""
        for node in [*reversed(self.nodes), *([self.head] if self.head else [])]:
            if node.killed:
                continue
            node.killed = True
            # ``ray start --block`` stops its node's processes on SIGTERM.
            with contextlib.suppress(ProcessLookupError):
                node.process.send_signal(signal.SIGTERM)
            try:
                node.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.process.pid, signal.SIGKILL)
                node.process.wait(timeout=10)
            _kill_session(node)
        for link in reversed(self._links):
            if link.startswith("netns:"):
                _ip("netns", "delete", link[6:], check=False)
            elif link.startswith("lo:"):
                _ip("addr", "del", link[3:], "dev", "lo", check=False)
            else:
                _ip("link", "delete", link, check=False)
        self._links.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def netns_available() -> bool:
    """Whether this process may make network namespaces and veth links (root, ``ip``, ``unshare``)."""
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("unshare") is None:
        return False
    probe = f"ssclprobe{os.getpid()}"
    ok = _ip("netns", "add", probe, check=False)
    if ok:
        _ip("netns", "delete", probe, check=False)
    return ok


def _ip(*args: str, check: bool = True) -> bool:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {out.stderr.strip()}")
    return out.returncode == 0


def _has_token() -> bool:
    return bool(os.environ.get("RAY_AUTH_TOKEN") or (Path.home() / ".ray" / "auth_token").is_file())


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _wait_for_port(host: str, port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"ray start exited ({proc.returncode}): {log.read_text()[-2000:]}") from None
            time.sleep(0.5)
    raise TimeoutError(f"the Ray head did not listen on {host}:{port} within {_START_TIMEOUT:g} s")


def _kill_session(node: LocalNode) -> None:
    """SIGKILL any process left whose command line names the node's temporary directory
    (Ray's processes started outside its process group)."""
    import psutil

    marker = str(node.temp_dir)
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any(marker in part for part in proc.info["cmdline"] or ()):
                proc.kill()
