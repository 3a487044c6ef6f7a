"""Idle CPU of the dashboard (run by hand, prints a table; never a test).

    python bench/bench_idle.py [--seconds 20] [--warmup 40] [--projects 46]

Each case runs the real ``nexus-tui`` in a tmux session (a real terminal, 170x46), lets it load
and settle for ``--warmup`` seconds, then reads the process's CPU time (utime + stime, all its
threads, from /proc/PID/stat) over ``--seconds`` wall seconds while nothing changes on disk:

1. one 200-task run open (bench_tui's engine-made run);
2. the demo (``--demo``: built by the real core, then idle);
3. ``--discover`` over ``--projects`` projects (bench_overview's data, 20 runs x 10 tasks each);
4. one 200-task run touched just before (its ages in seconds: every visible row redrawn each
   second), measured after a 10 s warm-up: what the first minute after activity costs.

"Nothing changing" starts once the data's last write is over a minute old (a table shows an
age's seconds in its first minute only, ``nexus_tui/widgets/ages.py``): cases 1-3 are measured
after ``--warmup`` and at least ``QUIET_SECONDS`` after their data was written.

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
QUIET_SECONDS = 61.0
FRESH_WARMUP_SECONDS = 10.0
TUI = str(Path(sys.executable).with_name("nexus-tui"))


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15)


def idle_percent(pid: int, seconds: float) -> float:
    before, began = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - began) * 100


def in_tmux(command: list[str], home: str, warmup: float, seconds: float, quiet_from: float | None) -> float:
    """``command`` in a tmux session on a private server (its environment given in the command:
    a tmux server keeps the one it started with), measured after ``warmup`` and, unless
    ``quiet_from`` is None, not before ``QUIET_SECONDS`` after that moment (time.monotonic)."""
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
        began = time.monotonic()
        settled = began + warmup if quiet_from is None else max(began + warmup, quiet_from + QUIET_SECONDS)
        time.sleep(max(0.0, settled - time.monotonic()))
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
    parser.add_argument("--only", choices=("one", "demo", "discover", "fresh"), help="one case only")
    args = parser.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="nexus-bench-idle-"))
    try:
        one = parent / "one"
        template_run(one, 200)
        fleet = parent / "fleet"
        build(fleet, args.projects, 20, 10)
        written = time.monotonic()
        home = str(parent / "home")
        os.makedirs(home)
        sleeper = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({args.seconds + 1})"])
        time.sleep(0.5)
        floor = idle_percent(sleeper.pid, args.seconds)
        sleeper.wait()
        figures = {"floor: a sleeping python process": floor}
        # (title, command, warm-up, when its data was last written: None for the demo, built at start)
        cases: dict[str, tuple[str, list[str], float, float | None]] = {
            "one": ("one 200-task run open", [TUI, "-d", str(one)], args.warmup, written),
            "demo": ("the demo (--demo)", [TUI, "--demo"], max(args.warmup, QUIET_SECONDS + 10), None),
            "discover": (
                f"--discover over {args.projects} projects",
                [TUI, "--discover", str(fleet)],
                args.warmup,
                written,
            ),
        }
        for case, (title, command, warmup, quiet_from) in cases.items():
            if args.only in (None, case):
                figures[title] = in_tmux(command, home, warmup, args.seconds, quiet_from)
        if args.only in (None, "fresh"):
            fresh = parent / "fresh"
            template_run(fresh, 200)  # its ages are seconds old: each visible row moves every second
            title = "one 200-task run touched just before (ages in seconds)"
            figures[title] = in_tmux([TUI, "-d", str(fresh)], home, FRESH_WARMUP_SECONDS, args.seconds, None)
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    width = max(len(key) for key in figures)
    print(
        f"idle CPU, % of a core, over {args.seconds:g} s after a {args.warmup:g} s warm-up and a minute"
        f" without writes (the demo: {max(args.warmup, QUIET_SECONDS + 10):g} s; the last case:"
        f" {FRESH_WARMUP_SECONDS:g} s after its run was written):"
    )
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:6.2f} %")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
