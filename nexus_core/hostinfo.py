"""Facts about this host and process: hostname, pid, liveness probes."""

from __future__ import annotations

import errno
import os
from typing import Literal

Liveness = Literal["alive", "dead", "unknown"]
# os.kill takes a C pid_t: anything past it is not a pid at all.
_PID_T_MAX = 2**31 - 1


def hostname() -> str:
    # What socket.gethostname() returns (POSIX gethostname() reads the uname nodename), without
    # importing socket and its enums (several ms on every mutation).
    return os.uname().nodename


def pid() -> int:
    return os.getpid()


def pid_alive(process_id: int) -> bool:
    """Signal-0 probe of a pid that ``usable_pid`` accepted (callers use ``owner_liveness`` or
    ``pid_liveness``, which check). EPERM means the process exists (someone else's): alive."""
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


def usable_pid(process_id: object) -> int | None:
    """``process_id`` as a pid that may be probed, or None: a bool, a non-integer, 0 (our own
    process group), a negative number (a group, or every process) or a value past pid_t is not."""
    if isinstance(process_id, bool):
        return None
    if isinstance(process_id, float) and process_id.is_integer():
        process_id = int(process_id)  # JSON numbers: 4242.0 is 4242, as in the reference
    if not isinstance(process_id, int) or process_id < 1 or process_id > _PID_T_MAX:
        return None
    return process_id


def owner_liveness(host: object, process_id: object) -> Liveness:
    """Whether the owner ``process_id`` recorded on ``host`` still runs: "alive" or "dead" for a
    usable pid of THIS host; "unknown" for another host or an unusable pid. The one place that
    decides; each caller states what "unknown" means for it."""
    local = usable_pid(process_id)
    if local is None or host != hostname():
        return "unknown"
    return "alive" if pid_alive(local) else "dead"


def owner_gone(host: object, process_id: object) -> bool:
    """Whether the owner recorded as ``process_id`` on ``host`` can certainly no longer run: its
    ``owner_liveness`` is "dead", or the record is of THIS host but names no pid that can be
    probed (nothing can run under it). Another host's owner is never gone: it cannot be told."""
    liveness = owner_liveness(host, process_id)
    return liveness == "dead" or (liveness == "unknown" and host == hostname())


def pid_liveness(process_id: object) -> Liveness:
    """``owner_liveness`` of a pid known to be of this host (e.g. in a local file name)."""
    local = usable_pid(process_id)
    if local is None:
        return "unknown"
    return "alive" if pid_alive(local) else "dead"
