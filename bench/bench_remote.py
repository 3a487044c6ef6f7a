"""``nexus-tui --ssh`` figures against a real sshd on 127.0.0.1 (run by hand, prints a table;
never a test).

    python bench/bench_remote.py [--projects 20] [--tasks 10] [--changes 20] [--idle 20]

1. data: ``--projects`` projects of one engine-made run of ``--tasks`` tasks each (the first
   task started), plus one local project, the floor;
2. the dashboard (headless, in this process) opens the local project and every remote one as
   ``--ssh testhost:PATH`` through tests/ssh_kit.py's sshd (its own host key and client config):
   one ssh connection and one ``nexus observe`` for the 20; time until every remote tab shows
   its runs;
3. idle cost over ``--idle`` seconds: CPU seconds and resident memory of the dashboard process,
   of the local ssh processes (the multiplexed master and the observer's session) and of the
   remote observer;
4. latency: a run file replaced on the remote side (a task flipped running/blocked) until
   the remote tab's snapshot has the new sequence, against the same on the local tab (the floor:
   same machine, same files, no ssh), p50/p95/max over ``--changes`` changes each.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_tui import envelope_for, replace_atomically  # noqa: E402
from ssh_kit import HOST, REMOTE_NEXUS, SshServer, _descendants  # noqa: E402

from nexus_core import engine  # noqa: E402
from nexus_core.state import canonical  # noqa: E402

HOST_BACKEND = {"kind": "host", "id": "bench", "sessionId": "s1"}
TICKS = os.sysconf("SC_CLK_TCK")


def build(root: Path, tasks: int) -> str:
    root.mkdir(parents=True)
    plan = {
        "id": "work",
        "maxParallel": tasks,
        "config": {},
        "tasks": [
            {
                "id": f"t{index}",
                "objective": f"Task {index}.",
                "scope": [f"out/t{index}"],
                "artifacts": [f"out/t{index}/r.txt"],
                "checks": [{"id": "ok", "command": "/bin/true", "args": []}],
                "maxAttempts": 2,
            }
            for index in range(tasks)
        ],
    }
    engine.create_run(str(root), plan)
    engine.start_task(str(root), "work", "t0", {"backend": HOST_BACKEND})
    return str(root)


def change(root: str, index: int) -> tuple[Path, bytes, int]:
    """The run file with its running task flipped to blocked or back and the sequence bumped
    (as bench_tui does): its path, its new bytes, the new sequence."""
    state = Path(root, ".bmad-plus/nexus/runs/work.json")
    run = canonical.parse(state.read_text("utf-8"))["run"]
    attempt = run["tasks"][0]["attempts"][-1]
    attempt["execution"] = "blocked" if attempt["execution"] == "running" else "running"
    run["sequence"] += 1
    return state, envelope_for(run), int(run["sequence"])


def proc_cpu_rss(pid: int) -> tuple[float, float]:
    """(CPU seconds, resident MiB) of a process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICKS
        rss = 0.0
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
        return cpu, rss
    except OSError:
        return 0.0, 0.0


def command_of(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def processes(server: SshServer, control_directory: str) -> dict[str, list[int]]:
    """The local ssh processes of the dashboard (its children and the master, which ssh detaches)
    and the remote observer (under sshd)."""
    local = [
        int(entry)
        for entry in os.listdir("/proc")
        if entry.isdigit() and control_directory.encode() in command_of(int(entry))
    ]
    remote = [pid for pid in _descendants(server.process.pid if server.process else 0) if b"observe" in command_of(pid)]
    return {"ssh (local)": local, "nexus observe (remote)": remote}


async def measure_floor(local: str, idle: float) -> dict[str, Any]:
    """The floor: the same dashboard with the local project alone (same process, measured first)."""
    from nexus_tui.app import NexusApp

    app = NexusApp([local], rescan_seconds=5.0)
    async with app.run_test(size=(170, 46)) as pilot:
        await asyncio.wait_for(app.loaded.wait(), 120)
        await pilot.pause(2)
        gc.collect()
        began = time.process_time()
        await asyncio.sleep(idle)
        return {
            f"floor: dashboard of the local project alone, CPU idle {idle:g} s (%)": (
                100 * (time.process_time() - began) / idle
            ),
            "floor: its RSS (MiB)": proc_cpu_rss(os.getpid())[1],
        }


async def measure(server: SshServer, local: str, remote: list[str], changes: int, idle: float) -> dict[str, Any]:
    from nexus_tui.app import NexusApp
    from nexus_tui.logic.ssh import parse_remote

    os.environ["NEXUS_SSH_COMMAND"] = server.ssh_command
    figures: dict[str, Any] = {}
    started = time.perf_counter()
    app = NexusApp(
        [local],
        remote=[parse_remote(f"{HOST}:{path}") for path in remote],
        remote_nexus=REMOTE_NEXUS,
        rescan_seconds=5.0,
    )
    async with app.run_test(size=(170, 46)) as pilot:
        sessions = [session for session in app.sessions if session.remote is not None]
        while not all(session.snapshot is not None and session.snapshot.runs for session in sessions):
            await asyncio.sleep(0.01)
        figures["every remote tab shows its runs (s)"] = time.perf_counter() - started
        await asyncio.wait_for(app.loaded.wait(), 120)
        await pilot.pause(2)
        gc.collect()
        hosts = list(app.remote_tabs.fleet.hosts.values())
        figures["hosts / ssh connections / observers"] = f"{len(hosts)} / 1 / 1"
        watched = processes(server, hosts[0].ssh.control_directory)
        before = {name: [proc_cpu_rss(pid) for pid in pids] for name, pids in watched.items()}
        own_before = time.process_time()
        await asyncio.sleep(idle)
        figures[f"dashboard CPU, idle {idle:g} s (% of a core)"] = 100 * (time.process_time() - own_before) / idle
        figures["dashboard RSS (MiB)"] = proc_cpu_rss(os.getpid())[1]
        for name, pids in watched.items():
            after = [proc_cpu_rss(pid) for pid in pids]
            cpu = sum(a[0] - b[0] for a, b in zip(after, before[name], strict=True))
            figures[f"{name}: processes, CPU idle (%), RSS (MiB)"] = (
                f"{len(pids)}, {100 * cpu / idle:.2f}, {sum(a[1] for a in after):.1f}"
            )
        for label, session, root in (
            ("local tab (floor)", app.sessions[0], local),
            ("remote tab", sessions[len(sessions) // 2], remote[len(sessions) // 2]),
        ):
            delays = []
            for _ in range(changes):
                state, data, sequence = change(root, len(delays))
                began = time.perf_counter()
                replace_atomically(state, data)
                while True:
                    snapshot = session.snapshot
                    view = snapshot.run("work") if snapshot else None
                    if view is not None and (view.sequence or 0) >= sequence:
                        break
                    await asyncio.sleep(0.002)
                delays.append(1000 * (time.perf_counter() - began))
                await asyncio.sleep(0.3)
            delays.sort()
            figures[f"{label}: change shown p50 / p95 / max (ms)"] = (
                f"{statistics.median(delays):.0f} / {delays[int(0.95 * (len(delays) - 1))]:.0f} / {delays[-1]:.0f}"
            )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--projects", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--idle", type=float, default=20.0)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nexus-bench-remote-") as temp:
        base = Path(temp)
        local = build(base / "local", options.tasks)
        remote = [build(base / f"remote-{index:02d}", options.tasks) for index in range(options.projects)]
        server = SshServer(base / "sshd")
        server.start()
        try:
            figures = asyncio.run(measure_floor(local, options.idle))
            figures.update(asyncio.run(measure(server, local, remote, options.changes, options.idle)))
        finally:
            server.stop()
    print(f"nexus-tui --ssh: {options.projects} remote projects of {options.tasks} tasks, one host (real sshd)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name, value in figures.items():
        shown = f"{value:.2f}" if isinstance(value, float) else str(value)
        print(f"  {name:<62} {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
