"""A real Redis Cluster for the tests: three masters and three replicas of
redis-server on loopback ports, which a test can crash, fail over, restart
and reshard under a client."""

from __future__ import annotations

import ctypes
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
SLOTS = 16384
BUS_OFFSET = 10000  # a node's cluster bus listens on its port + 10000
NODE_TIMEOUT_MS = 1000  # a crashed master is failed over in about two seconds
STARTUP_SECONDS = 30.0  # bounded waits: generous for a loaded 2-core machine
FAILOVER_SECONDS = 30.0
MIGRATE_BATCH = 100
NODE_CONFIG = {
    "bind": HOST,
    "cluster-enabled": "yes",
    "cluster-config-file": "nodes.conf",
    "cluster-node-timeout": str(NODE_TIMEOUT_MS),
    "cluster-replica-validity-factor": "0",  # a replica is always eligible for failover
    "cluster-allow-replica-migration": "no",  # the topology changes only when a test says so
    "save": "",
    "appendonly": "no",
    "repl-diskless-sync-delay": "0",  # replicas sync at once, not after 5 s
    "logfile": "redis.log",  # in the node's directory
}


def _die_with_parent() -> None:
    """In the child before exec: on Linux, be sent SIGTERM when the test run
    thread that started this node ends, so that a crashed run leaves no nodes behind."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def free_cluster_ports(count: int, taken: Iterable[int] = ()) -> list[int]:
    """*count* distinct ports that are free on loopback, each with its cluster
    bus port (port + 10000) free too, avoiding *taken*."""
    used = set(taken)
    ports: list[int] = []
    for _ in range(10000):
        port = random.randrange(20000, 55535 - BUS_OFFSET)
        if port in used or port + BUS_OFFSET in used or port - BUS_OFFSET in used:
            continue
        if _bindable(port) and _bindable(port + BUS_OFFSET):
            ports.append(port)
            used.update((port, port + BUS_OFFSET))
            if len(ports) == count:
                return ports
    raise RuntimeError(f"no {count} free loopback ports with free cluster bus ports")


def wait_until(condition: Callable[[], str | None], seconds: float, what: str) -> None:
    """Poll *condition* until it returns None (all is well) or a reason not
    yet; after *seconds* raise TimeoutError naming *what* and the last reason."""
    deadline = time.monotonic() + seconds
    reason: str | None = "not checked"
    while True:
        try:
            reason = condition()
        except Exception as exc:  # a node still starting or just killed
            reason = f"{type(exc).__name__}: {exc}"
        if reason is None:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not done after {seconds:.0f} s: {reason}")
        time.sleep(0.05)


class Node:
    """One redis-server of the cluster: ``.port``, ``.address``, ``.id`` (its
    cluster node id), ``.client`` (a plain redis.Redis to this node only) and
    ``.alive`` (False between kill and restart)."""

    def __init__(self, port: int, directory: Path) -> None:
        import redis

        self.port = port
        self.address = f"{HOST}:{port}"
        self.directory = directory
        self.id = ""
        self.process: subprocess.Popen[bytes] | None = None
        self.client = redis.Redis(host=HOST, port=port, socket_timeout=5, socket_connect_timeout=2)

    def __repr__(self) -> str:
        return f"Node({self.address}{'' if self.alive else ', killed'})"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start redis-server (again) on this node's port, directory and
        cluster config file; wait until it answers PING."""
        import redis

        self.directory.mkdir(parents=True, exist_ok=True)
        options = {"port": str(self.port), "dir": str(self.directory), **NODE_CONFIG}
        self.process = subprocess.Popen(
            ["redis-server", *(arg for name, value in options.items() for arg in (f"--{name}", value))],
            stdout=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,  # a libc call only, before exec
        )
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on {self.address} did not start: see {self.log}") from None
                time.sleep(0.05)
        self.id = self.client.execute_command("CLUSTER", "MYID").decode()

    @property
    def log(self) -> Path:
        return self.directory / "redis.log"

    def info(self, section: str) -> dict[str, str]:
        """An INFO section, its values as strings."""
        return {k: str(v) for k, v in self.client.info(section).items()}

    def cluster_info(self) -> dict[str, str]:
        """CLUSTER INFO: cluster_state, cluster_slots_ok, cluster_known_nodes, ..."""
        text = self.client.execute_command("CLUSTER", "INFO").decode()
        return {k: v.strip() for k, _, v in (line.partition(":") for line in text.splitlines()) if k}

    def view(self) -> dict[str, dict[str, Any]]:
        """This node's CLUSTER NODES, by node id: flags, master (id or "-"), slots."""
        raw = self.client.execute_command("CLUSTER", "NODES")
        view: dict[str, dict[str, Any]] = {}
        for line in (raw.decode() if isinstance(raw, bytes) else raw).splitlines():
            fields = line.split()
            slots: set[int] = set()
            for part in fields[8:]:
                if part.startswith("["):  # a slot being imported or migrated
                    continue
                first, _, last = part.partition("-")
                slots.update(range(int(first), int(last or first) + 1))
            view[fields[0]] = {"flags": set(fields[2].split(",")), "master": fields[3], "slots": slots}
        return view

    def kill(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.client.close()


class RedisCluster:
    """A real Redis Cluster of three masters with one replica each on loopback
    ports, without persistence, its files in a private temporary directory.

    ``.url`` is one master's URL, as a user would configure it; ``.nodes``
    the six Nodes; ``.client`` a blocking redis.cluster.RedisCluster for the
    tests' own assertions. A test can find who serves a key (``master_of``,
    ``replica_of``), crash a master and wait for its replica to take over
    (``kill``, ``wait_for_failover``, ``restart``), reshard a slot live
    (``move_slot``, or ``begin_move`` and ``finish_move`` around a test that
    wants ASK redirections), and empty it for the next test (``flush``)."""

    def __init__(self, masters: int = 3, replicas: int = 1) -> None:
        if not (shutil.which("redis-server") and shutil.which("redis-cli")):
            raise RuntimeError("a Redis Cluster needs redis-server and redis-cli on PATH")
        self.directory = Path(tempfile.mkdtemp(prefix="redis-cluster-"))
        ports = free_cluster_ports(masters * (1 + replicas))
        self.nodes = [Node(port, self.directory / str(port)) for port in ports]
        self.replicas = replicas
        self.url = f"redis://{self.nodes[0].address}/0"
        self._migrations: dict[int, tuple[Node, Node]] = {}
        self._replicas_at_kill: dict[str, list[str]] = {}
        self._client: Any = None
        try:
            self.start()
        except BaseException:
            self.stop()
            raise

    def start(self) -> None:
        """Start the nodes, create the cluster and wait until it is stable."""
        for node in self.nodes:
            node.start()
        addresses = [node.address for node in self.nodes]
        created = subprocess.run(
            ["redis-cli", "--cluster", "create", *addresses, "--cluster-replicas", str(self.replicas), "--cluster-yes"],
            capture_output=True,
            text=True,
            timeout=STARTUP_SECONDS,
        )
        if created.returncode:
            raise RuntimeError(f"redis-cli --cluster create failed:\n{created.stdout}{created.stderr}")
        self.wait_until_stable(STARTUP_SECONDS, "creating the cluster")
        # redis-cli chooses which nodes become masters: .url names one of them.
        self.url = f"redis://{self.masters()[0].address}/0"

    # -- topology -----------------------------------------------------------------------------------------------

    @property
    def alive(self) -> list[Node]:
        return [node for node in self.nodes if node.alive]

    def node(self, node_id: str) -> Node:
        return next(node for node in self.nodes if node.id == node_id)

    def _view(self) -> dict[str, dict[str, Any]]:
        for node in self.alive:
            try:
                return node.view()
            except Exception:  # ask the next live node
                continue
        raise RuntimeError("no node of the cluster answers")

    def masters(self) -> list[Node]:
        """The live masters that serve slots, as the cluster sees them now."""
        view = self._view()
        return [n for n in self.alive if "master" in view[n.id]["flags"] and view[n.id]["slots"]]

    def replicas_of(self, master: Node) -> list[Node]:
        view = self._view()
        return [n for n in self.nodes if view.get(n.id, {}).get("master") == master.id]

    def replica_of(self, master: Node) -> Node:
        """The (first) replica of *master*."""
        replicas = self.replicas_of(master)
        if not replicas:
            raise LookupError(f"{master} has no replica")
        return replicas[0]

    def slot_of(self, key: str | bytes) -> int:
        from redis.crc import key_slot

        return key_slot(key.encode() if isinstance(key, str) else key)

    def owner_of_slot(self, slot: int) -> Node:
        view = self._view()
        return next(self.node(node_id) for node_id, entry in view.items() if slot in entry["slots"])

    def master_of(self, key: str | bytes) -> Node:
        """The master that serves *key*'s slot now."""
        return self.owner_of_slot(self.slot_of(key))

    @property
    def client(self) -> Any:
        """A blocking redis.cluster.RedisCluster (bytes answers) for the tests' assertions."""
        import redis.cluster

        if self._client is None:
            host, port = self.masters()[0].address.split(":")
            self._client = redis.cluster.RedisCluster(host=host, port=int(port), decode_responses=False)
        return self._client

    # -- waiting ------------------------------------------------------------------------------------------------

    def problem(self) -> str | None:
        """Why the cluster is not stable now, or None: every live node says
        cluster_state:ok with all slots served, all live nodes agree on who
        is master of whom and flag none of them failing, and every live
        replica's link to its master is up and done syncing."""
        live = {node.id: node for node in self.alive}
        views = {}
        for node in live.values():
            info = node.cluster_info()
            if info.get("cluster_state") != "ok":
                return f"{node}: cluster_state:{info.get('cluster_state')}"
            if info.get("cluster_slots_ok") != str(SLOTS):
                return f"{node}: cluster_slots_ok:{info.get('cluster_slots_ok')}"
            if info.get("cluster_known_nodes") != str(len(self.nodes)):
                return f"{node}: cluster_known_nodes:{info.get('cluster_known_nodes')}"
            views[node.id] = node.view()
        for node_id, node in live.items():
            own = views[node_id][node_id]
            for seer, view in views.items():
                seen = view.get(node_id)
                if seen is None:
                    return f"{live[seer]} does not know {node}"
                if seen["flags"] & {"fail", "fail?", "handshake", "noaddr"}:
                    return f"{live[seer]} flags {node} {','.join(sorted(seen['flags']))}"
                if seen["master"] != own["master"] or ("master" in seen["flags"]) != ("master" in own["flags"]):
                    return f"{live[seer]} and {node} disagree on {node}'s role"
                if seen["slots"] != own["slots"]:
                    return f"{live[seer]} and {node} disagree on {node}'s slots"
            if "slave" in own["flags"]:
                replication = node.info("replication")
                if replication.get("master_link_status") != "up" or replication.get("master_sync_in_progress") != "0":
                    return f"{node}: replica not in sync with {own['master'][:8]}"
        return None

    def wait_until_stable(self, seconds: float = STARTUP_SECONDS, what: str = "the cluster") -> None:
        wait_until(self.problem, seconds, f"{what} (dir {self.directory})")

    # -- failures -----------------------------------------------------------------------------------------------

    def kill(self, node: Node) -> None:
        """SIGKILL *node*, as in a crash."""
        self._replicas_at_kill[node.id] = [replica.id for replica in self.replicas_of(node)]
        node.kill()
        if self._client is not None:
            # Its startup node may be the killed one: a fresh client rediscovers from the others.
            self._client.close()
            self._client = None

    def wait_for_failover(self, old_master: Node, seconds: float = FAILOVER_SECONDS) -> Node:
        """Wait until a replica of the killed *old_master* has been promoted
        and the surviving nodes are stable again (cluster_state:ok); the new master."""
        replicas = self._replicas_at_kill.get(old_master.id) or [n.id for n in self.replicas_of(old_master)]
        promoted: list[Node] = []

        def done() -> str | None:
            view = self._view()
            if view.get(old_master.id, {}).get("slots"):
                return f"{old_master} still serves {len(view[old_master.id]['slots'])} slots"
            promoted[:] = [self.node(i) for i in replicas if view[i]["master"] == "-" and view[i]["slots"]]
            if not promoted:
                return f"no replica of {old_master} promoted yet"
            return self.problem()

        wait_until(done, seconds, f"failing over {old_master}")
        return promoted[0]

    def restart(self, node: Node, seconds: float = STARTUP_SECONDS) -> None:
        """Start the killed *node* again on its port and cluster config; it
        rejoins (as a replica of whoever took over its slots) and syncs."""
        node.start()
        self.wait_until_stable(seconds, f"restarting {node}")

    # -- resharding ---------------------------------------------------------------------------------------------

    def begin_move(self, slot: int, to_master: Node, keys: int | None = None) -> int:
        """Start moving *slot* to *to_master*: IMPORTING on it, MIGRATING on
        the slot's owner, then MIGRATE *keys* of the slot's keys (all if
        None); the number of keys moved. The slot is left mid-migration, so
        clients are sent ASK for the moved keys, until ``finish_move``."""
        source = self.owner_of_slot(slot)
        if source is to_master:
            raise ValueError(f"{to_master} already serves slot {slot}")
        to_master.client.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source.id)
        source.client.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", to_master.id)
        self._migrations[slot] = (source, to_master)
        return self._migrate(slot, keys)

    def _migrate(self, slot: int, keys: int | None) -> int:
        source, target = self._migrations[slot]
        moved = 0
        while keys is None or moved < keys:
            batch = MIGRATE_BATCH if keys is None else min(MIGRATE_BATCH, keys - moved)
            names = source.client.execute_command("CLUSTER", "GETKEYSINSLOT", slot, batch)
            if not names:
                break
            source.client.execute_command("MIGRATE", HOST, target.port, "", 0, 5000, "KEYS", *names)
            moved += len(names)
        return moved

    def finish_move(self, slot: int, seconds: float = STARTUP_SECONDS) -> int:
        """Migrate the rest of *slot*'s keys, give the slot to its new owner
        with SETSLOT NODE on every master, and wait until all nodes agree;
        the number of keys moved now."""
        source, target = self._migrations[slot]
        moved = self._migrate(slot, None)
        masters = [target, source, *(m for m in self.masters() if m not in (target, source))]
        for master in masters:
            master.client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target.id)
        del self._migrations[slot]

        def agreed() -> str | None:
            for node in self.alive:
                owner = [i for i, entry in node.view().items() if slot in entry["slots"]]
                if owner != [target.id]:
                    return f"{node} sees slot {slot} served by {owner}"
            return self.problem()

        wait_until(agreed, seconds, f"moving slot {slot} to {target}")
        return moved

    def move_slot(self, slot: int, to_master: Node) -> int:
        """Reshard *slot* to *to_master* live, keys and all; clients that
        knew the old owner get MOVED. The number of keys moved."""
        return self.begin_move(slot, to_master) + self.finish_move(slot)

    # -- between tests ------------------------------------------------------------------------------------------

    def flush(self) -> None:
        """FLUSHALL on every master, and wait for their replicas to follow."""
        for master in self.masters():
            master.client.flushall()
            replicas = [replica for replica in self.replicas_of(master) if replica.alive]
            master.client.execute_command("WAIT", len(replicas), 5000)

    def stop(self) -> None:
        """Stop every node and remove the cluster's directory."""
        if self._client is not None:
            self._client.close()
            self._client = None
        for node in self.nodes:  # all asked to stop at once, then each waited for
            if node.process is not None and node.alive:
                node.process.terminate()
        for node in self.nodes:
            node.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
