"""Idle CPU of the dashboard (run by hand, prints a table; never a test).

    python bench/bench_idle.py [--seconds 20] [--warmup 40] [--projects 46]

Each case runs the real ``nexus-tui`` in a tmux session (a real terminal, 170x46), lets it load
and settle for ``--warmup`` seconds, then reads the process's CPU time (utime + stime, all its
threads, from /proc/PID/stat) over ``--seconds`` wall seconds while nothing changes on disk:

1. one 200-task run open (bench_tui's engine-made run);
2. the demo (``--demo``: built by the real core, then idle);
3. ``--discover`` over ``--projects`` projects (bench_overview's data, 20 runs x 10 tasks each).

The floor, measured in the same run: a Python process sleeping the same wall seconds.
Figures are "% of a core" (CPU seconds / wall seconds x 100).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_overview import build
from bench_tui import template_run

TICKS = os.sysconf("SC_CLK_TCK")
TUI = str(Path(sys.executable).with_name("nexus-tui"))


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15)


def idle_percent(pid: int, seconds: float) -> float:
    before, began = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - began) * 100


def in_tmux(command: list[str], home: str, warmup: float, seconds: float) -> float:
    """``command`` in a tmux session on a private server (its environment given in the command:
    a tmux server keeps the one it started with)."""
    # A server of its own per case: a new session on a server being killed can fail.
    server = ["tmux", "-L", f"nexus-bench-idle-{os.getpid()}-{time.monotonic_ns()}"]
    keep = {name: os.environ[name] for name in ("PATH", "PYTHONPATH") if name in os.environ}
    env = ["env", f"HOME={home}", f"XDG_CONFIG_HOME={home}/.config", *(f"{k}={v}" for k, v in keep.items())]
    shell = subprocess.list2cmdline([*env, *command])
    subprocess.run([*server, "new-session", "-d", "-s", "idle", "-x", "170", "-y", "46", f"exec {shell}"], check=True)
    try:
        listing = subprocess.run(
            [*server, "list-panes", "-t", "idle", "-F", "#{pane_pid}"], check=True, capture_output=True, text=True
        )
        pid = int(listing.stdout.split()[0])  # env execs the command: the same process
        time.sleep(warmup)
        if not os.path.exists(f"/proc/{pid}"):
            raise SystemExit(f"{command} exited during the warm-up")
        return idle_percent(pid, seconds)
    finally:
        subprocess.run([*server, "kill-server"], check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=40.0)
    parser.add_argument("--projects", type=int, default=46)
    parser.add_argument("--only", choices=("one", "demo", "discover"), help="one case only")
    args = parser.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="nexus-bench-idle-"))
    try:
        one = parent / "one"
        template_run(one, 200)
        fleet = parent / "fleet"
        build(fleet, args.projects, 20, 10)
        home = str(parent / "home")
        os.makedirs(home)
        sleeper = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({args.seconds + 1})"])
        time.sleep(0.5)
        floor = idle_percent(sleeper.pid, args.seconds)
        sleeper.wait()
        cases = {
            "one": ("one 200-task run open", [TUI, "-d", str(one)]),
            "demo": ("the demo (--demo)", [TUI, "--demo"]),
            "discover": (f"--discover over {args.projects} projects", [TUI, "--discover", str(fleet)]),
        }
        figures = {"floor: a sleeping python process": floor}
        for case, (title, command) in cases.items():
            if args.only in (None, case):
                figures[title] = in_tmux(command, home, args.warmup, args.seconds)
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    width = max(len(key) for key in figures)
    print(f"idle CPU, % of a core, over {args.seconds:g} s after a {args.warmup:g} s warm-up:")
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:6.2f} %")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
