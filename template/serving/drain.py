"""Let the engine accept every queued connection before it closes its listener.

Closing a listening socket resets each connection still in its accept queue, request
bytes and all (docs/reliability.md). On SIGTERM the launcher first makes the listener
drop new SYNs (a socket filter: the client's connect is retried, then refused once the
server is gone, never reset after it sent a request), waits while the engine serves
what is queued, and only then hands the signal on. Each engine module puts the drain in
front of its own SIGTERM handler and says whose listener to filter.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import threading
import time
from collections.abc import Callable, Collection, Sequence
from types import FrameType

SO_ATTACH_FILTER = 26  # <linux/filter.h>; the socket module does not name it
# Classic BPF on each segment, TCP header first: drop SYN without ACK (a new connection),
# keep the rest, so handshakes already under way complete and join the queue.
SYN_DROP = [(0x30, 0, 0, 13),          # ldb [13]         TCP flags
            (0x54, 0, 0, 0x12),        # and #SYN|ACK
            (0x15, 0, 1, 0x02),        # jeq #SYN, drop, keep
            (0x06, 0, 0, 0),           # drop
            (0x06, 0, 0, 0xFFFFFFFF)]  # keep
DRAIN_TIMEOUT = 5.0  # seconds, at most
STOP_IDLE = 0.25  # seconds a connection between requests has, at a stop, to send one
EMPTY_FOR = 0.05  # seconds the queues must stay empty
POLL = 0.005
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp
Handler = Callable[[int, FrameType | None], object]


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Instruction))]


def refuse_new_connections(socks: Sequence[socket.socket]) -> None:
    code = (_Instruction * len(SYN_DROP))(*(_Instruction(*row) for row in SYN_DROP))
    program = bytes(_Program(len(SYN_DROP), code))
    for sock in socks:
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, program)
        except PermissionError:
            # Some kernels refuse the filter without privileges (EPERM, root in a container
            # too). A backlog of 0 instead: at most one new connection at a time is queued.
            sock.listen(0)


def own_listeners(port: int) -> list[socket.socket]:
    """This process's listening TCP sockets on `port` (duplicates: close them)."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError, ValueError):
            sock = socket.socket(fileno=os.dup(int(name)))
            if (sock.family in (socket.AF_INET, socket.AF_INET6)
                    and sock.type == socket.SOCK_STREAM and sock.getsockname()[1] == port
                    and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)):
                found.append(sock)
                continue
            sock.close()
    return found


def queued(port: int, inodes: Collection[int] = ()) -> int:
    """Connections waiting to be accepted on `port`, over every listener on it (or
    those of `inodes` alone: a worker's own, beside its neighbours' and successors')."""
    total = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                if (fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port
                        and (not inodes or int(fields[9]) in inodes)):
                    total += int(fields[4].split(":")[1], 16)  # rx_queue: the accept queue
    return total


def wait_until_accepted(port: int, timeout: float, inodes: Collection[int] = ()) -> int:
    """Wait until no connection is queued on `port` (on `inodes`, if given); how many
    still are at `timeout`."""
    deadline, empty_since = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        if queued(port, inodes):
            empty_since = None
        elif empty_since is None:
            empty_since = time.monotonic()
        elif time.monotonic() - empty_since >= EMPTY_FOR:
            return 0
        time.sleep(POLL)
    return queued(port, inodes)


def refuse_own_listeners(port: int) -> set[int]:
    """Drop new SYNs on this process's listeners on `port` (found in /proc: granian's
    workers and gunicorn's arbiter hold theirs where the launcher cannot see them);
    their inodes, as /proc/net/tcp names them."""
    socks = own_listeners(port)
    refuse_new_connections(socks)
    inodes = {os.fstat(sock.fileno()).st_ino for sock in socks}
    for sock in socks:
        sock.close()
    return inodes


def drain_own_listeners(port: int, graceful_timeout: float) -> None:
    """A worker's own listeners on `port` refuse new connections, and the connections
    queued on them are accepted (granian's and Hypercorn's workers, each at its stop).
    A drain that fails must not keep the stop from happening."""
    with contextlib.suppress(OSError):
        inodes = refuse_own_listeners(port)
        wait_until_accepted(port, drain_timeout(graceful_timeout), inodes)


def drain_timeout(graceful_timeout: float) -> float:
    """How long SIGTERM waits for queued connections to be accepted, before the
    engine's own grace period for the requests in flight."""
    return min(DRAIN_TIMEOUT, graceful_timeout)


def draining(handler: Handler, port: int, timeout: float,
             refuse: Callable[[], None]) -> Handler:
    """A signal handler that refuses new connections, waits until the queued ones are
    accepted (in a thread: the engine goes on serving), then calls `handler`."""
    started = threading.Event()

    def handle(sig: int, frame: FrameType | None) -> None:
        if started.is_set():  # a second signal: stop waiting
            handler(sig, frame)
            return
        started.set()

        def then() -> None:
            with contextlib.suppress(OSError):
                refuse()
                wait_until_accepted(port, timeout)
            handler(sig, frame)

        threading.Thread(target=then, name="drain", daemon=True).start()

    return handle


def bytes_waiting(transport: object) -> bool:
    """Whether the kernel holds bytes this connection's loop has not read yet (a loop
    runs its timers before it reads: libuv's does): a request on its way, not silence."""
    get_extra_info = getattr(transport, "get_extra_info", None)
    sock = get_extra_info("socket") if get_extra_info is not None else None
    if sock is None:
        return False
    try:
        with socket.socket(fileno=os.dup(sock.fileno())) as peek:
            return bool(peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except OSError:  # nothing waiting (EAGAIN), or the connection is gone
        return False

