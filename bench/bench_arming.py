"""What arming a recursive watcher over a large tree costs the UI thread (run by hand, prints a
table; never a test).

    python bench/bench_arming.py [--directories 10000] [--rounds 3]

A tree of ``--directories`` directories (100 per parent, a file in each) is armed by:

1. watchfiles' RustNotify constructor (the fallback watcher), called on the main thread as the
   dashboard calls it (its event loop's thread): the UI is held for as long as it takes;
2. our inotify watcher's ``arm`` in a thread of its own, as the dashboard runs it now.

Meanwhile the main thread ticks every millisecond (as an event loop waiting on its timers); the
figure is its longest gap between ticks (the UI's worst stall). The floor: the same ticking with
nothing armed, over the same wall time. Each figure is the median of ``--rounds``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable

from nexus_tui import inotify


def build(top: str, directories: int) -> None:
    for index in range(directories):
        directory = os.path.join(top, f"d{index // 100:03d}", f"e{index % 100:02d}")
        os.makedirs(directory)
        with open(os.path.join(directory, "f.txt"), "w") as handle:
            handle.write("x")


def longest_gap_while(work: Callable[[], None]) -> tuple[float, float]:
    """(work's wall seconds, the main thread's longest gap between 1 ms ticks meanwhile)."""
    done = threading.Event()
    took: list[float] = []

    def run() -> None:
        began = time.perf_counter()
        work()
        took.append(time.perf_counter() - began)
        done.set()

    threading.Thread(target=run).start()
    gap, last = 0.0, time.perf_counter()
    while not done.is_set():
        time.sleep(0.001)
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    return took[0], gap


def on_the_main_thread(work: Callable[[], None]) -> tuple[float, float]:
    """(work's wall seconds, the same: the main thread does nothing else meanwhile)."""
    began = time.perf_counter()
    work()
    took = time.perf_counter() - began
    return took, took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--directories", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    if not inotify.available():
        print("no inotify on this system")
        return 1
    from watchfiles._rust_notify import RustNotify

    with tempfile.TemporaryDirectory(prefix="nexus-bench-arming-") as top:
        build(top, options.directories)
        results: dict[str, list[tuple[float, float]]] = {"rust": [], "inotify": [], "floor": []}
        for _ in range(options.rounds):

            def rust() -> None:
                RustNotify([top], False, False, 300, True, True).close()

            def ours() -> None:
                watcher = inotify.Watcher([top])
                try:
                    assert watcher.arm() and watcher.watches == options.directories + 101
                finally:
                    watcher.close()

            results["rust"].append(on_the_main_thread(rust))
            results["inotify"].append(longest_gap_while(ours))
            wall = results["inotify"][-1][0]
            results["floor"].append(longest_gap_while(lambda: time.sleep(wall)))  # noqa: B023

    def median(case: str, which: int) -> float:
        return statistics.median(result[which] for result in results[case]) * 1000

    floor = median("floor", 1)
    print(f"arming a watch over {options.directories} directories, median of {options.rounds}:")
    print(f"{'':44} {'arming':>9} {'UI stall':>10} {'x floor':>8}")
    print(f"{'floor: 1 ms ticks, nothing armed':44} {'':>9} {floor:8.1f}ms {1.0:8.1f}")
    for case, label in (
        ("rust", "watchfiles RustNotify(), on the UI thread"),
        ("inotify", "inotify Watcher.arm(), in its own thread"),
    ):
        stall = median(case, 1)
        print(f"{label:44} {median(case, 0):7.1f}ms {stall:8.1f}ms {stall / floor:8.1f}")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
