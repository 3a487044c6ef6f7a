"""Facts about this host and process: hostname, pid, liveness probes."""

from __future__ import annotations

import errno
import os


def hostname() -> str:
    # What socket.gethostname() returns (POSIX gethostname() reads the uname nodename), without
    # importing socket and its enums (several ms on every mutation).
    return os.uname().nodename


def pid() -> int:
    return os.getpid()


def pid_alive(process_id: int) -> bool:
    """Signal-0 probe. EPERM means the process exists (owned by someone else): alive."""
    try:
        os.kill(process_id, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError as error:
        if error.errno == errno.ESRCH:
            return False
        raise
    return _not_zombie(process_id)


def _not_zombie(process_id: int) -> bool:
    # A zombie has exited; only its exit status is left for the parent to collect.
    try:
        with open(f"/proc/{process_id}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return True
    close = data.rfind(b")")
    return not (close >= 0 and data[close + 2 : close + 3] == b"Z")
