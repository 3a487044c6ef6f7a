"""What ``nexus-tui serve`` holds a connection to before its token is even looked at.

Another local user can open connections to the loopback port without knowing the token. Each
one costs the server a file descriptor for as long as it stays open, and aiohttp keeps a silent
one for its keep-alive timeout: 1,100 half-open connections once exhausted the descriptors
(``Too many open files``) and locked the operator out. So:

- the server accepts connections itself (:func:`accept_connections`) and counts those that have
  not yet made a request carrying the token or the token's cookie (:class:`ConnectionGate`):
  at most ``limit`` at once (a new one closes the oldest), none for longer than ``seconds``
  (a request header read slowly, byte by byte, counts against the same deadline), so a flood
  costs at most ``limit`` descriptors and the operator's own connection, which shows the
  token at once, always gets in;
- when the descriptors run out all the same, the oldest unproven connection is closed to make
  room, rather than stopping accepting for a while as asyncio does;
- the soft limit on open files is raised to the hard one at start (:func:`raise_open_files`);
- a request whose ``Host`` is not a loopback name, the listening address or a name given with
  ``--public-host`` is refused (:func:`host_allowed`): a page on another site that made its
  name resolve to 127.0.0.1 (DNS rebinding) reaches nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import resource
import socket
from collections.abc import Callable, Iterable

UNPROVEN_LIMIT = 64  # connections without the token at once
UNPROVEN_SECONDS = 10.0  # how long one may stay without making a request that shows it
OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
CLIENT_GAVE_UP = (errno.ECONNABORTED, errno.EPROTO, errno.EINTR, errno.EAGAIN, errno.EPERM)
RETRY_SECONDS = 0.05


def raise_open_files() -> tuple[int, int]:
    """The soft limit on open files raised to the hard one; the (soft, hard) limits now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


class ConnectionGate:
    """The connections that have not shown the token yet, oldest first, each with its deadline."""

    def __init__(self, limit: int = UNPROVEN_LIMIT, seconds: float = UNPROVEN_SECONDS) -> None:
        self.limit = max(1, limit)
        self.seconds = seconds
        self._unproven: dict[asyncio.BaseTransport, asyncio.TimerHandle] = {}
        self.closed = 0  # unproven connections closed (evicted or past the deadline)

    def __len__(self) -> int:
        return len(self._unproven)

    def admit(self, transport: asyncio.BaseTransport) -> None:
        """A new connection: counted until it shows the token; the oldest goes if full."""
        for gone in [t for t in self._unproven if t.is_closing()]:
            self._unproven.pop(gone).cancel()
        while len(self._unproven) >= self.limit:
            self.close_oldest()
        loop = asyncio.get_running_loop()
        self._unproven[transport] = loop.call_later(self.seconds, self._close, transport)

    def prove(self, transport: asyncio.BaseTransport | None) -> None:
        """The connection made a request with the token (or its cookie): no longer counted."""
        handle = self._unproven.pop(transport, None) if transport is not None else None
        if handle is not None:
            handle.cancel()

    def close_oldest(self) -> bool:
        if not self._unproven:
            return False
        self._close(next(iter(self._unproven)))
        return True

    def _close(self, transport: asyncio.BaseTransport) -> None:
        handle = self._unproven.pop(transport, None)
        if handle is not None:
            handle.cancel()
        if not transport.is_closing():
            self.closed += 1
        if isinstance(transport, asyncio.Transport):
            transport.abort()  # no lingering close: the descriptor is free at once
        else:
            transport.close()


async def accept_connections(
    listener: socket.socket, protocol_factory: Callable[[], asyncio.Protocol], gate: ConnectionGate
) -> None:
    """Accept on ``listener`` until cancelled, each connection served by ``protocol_factory``'s
    protocol and admitted to ``gate``. An error other than running out of descriptors or a
    client giving up ends it (raised)."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            connection, _ = await loop.sock_accept(listener)
        except OSError as error:
            if error.errno in OUT_OF_DESCRIPTORS:
                # Room for the next one: the oldest connection that has not shown the token.
                gate.close_oldest()
                await asyncio.sleep(RETRY_SECONDS)
                continue
            if error.errno in CLIENT_GAVE_UP:
                continue
            raise
        try:
            transport, _ = await loop.connect_accepted_socket(protocol_factory, connection)
        except OSError:
            connection.close()
            continue
        gate.admit(transport)


def _host_name(header: str) -> str:
    """The name in a ``Host`` header (``name:port``, ``[v6]:port``), lower case, no final dot."""
    if header.startswith("["):
        name = header[1 : header.find("]")] if "]" in header else header[1:]
    else:
        name = header.rsplit(":", 1)[0] if header.count(":") == 1 else header
    return name.strip().lower().rstrip(".")


def loopback_name(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):  # always loopback (RFC 6761)
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed_names(listen_host: str, public_hosts: Iterable[str]) -> frozenset[str]:
    """The names a request may carry beyond loopback ones: the listening address (unless it is
    every address) and every ``--public-host``."""
    names = {_host_name(name) for name in public_hosts}
    listening = _host_name(listen_host)
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(listening).is_unspecified:
            listening = ""
    return frozenset(name for name in (*names, listening) if name)


def host_allowed(header: str | None, allowed: frozenset[str]) -> bool:
    """Whether a request's ``Host`` header names this server (a missing one does not)."""
    if not header:
        return False
    name = _host_name(header)
    return name in allowed or loopback_name(name)
