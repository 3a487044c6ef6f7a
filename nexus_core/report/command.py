"""The ``nexus report`` click command: read a run, print (or write to a new file) its report."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from typing import NoReturn

import click

from ..cli.output import write_bytes
from ..cli.refusal import refuse
from ..errors import NexusError
from ..paths import root_of
from ..supervise.command import run_click
from ..supervise.events import error_message
from . import FORMATS, Report, build_report

REPORT_HELP = """Write RUN's report: markdown (a pull request comment or a CI step summary),
junit (a CI test report: one test case per task) or html (one self-contained page).

\b
Read-only: never takes a lock, never writes under .bmad-plus. The report goes
to stdout, or with -o to FILE, which must be new: it is created 0600 (it
carries check output), never over an existing file or a symlink. The same
run state gives the same bytes.
"""
STATE_DIR = ".bmad-plus"


def render(report: Report, form: str) -> str:
    """The report in ``form`` (one of FORMATS). Each format is imported when asked: a format
    module reads the report's model from the package, which never imports a format."""
    if form == "markdown":
        from .markdown import render_markdown

        return render_markdown(report)
    if form == "junit":
        from .junit import render_junit

        return render_junit(report)
    if form == "html":
        from .html import render_html

        return render_html(report)
    raise NexusError(f"Unknown report format: {form} (use {', '.join(FORMATS)}).")


def refuse_existing(path: str) -> str:
    return f"-o {path} already exists; a report never overwrites a file. Name a new file."


def write_new_file(path: str, data: bytes, root: str) -> None:
    """``data`` into a new file at ``path`` (O_EXCL|O_NOFOLLOW, 0600): an existing file or any
    symlink there is refused, never followed or overwritten; nothing under the state directory."""
    parent = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    state_dir = os.path.join(root, STATE_DIR)
    if parent == state_dir or parent.startswith(state_dir + os.sep):
        raise NexusError(f"-o must not be inside {STATE_DIR}: a report never writes there.")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise NexusError(refuse_existing(path)) from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise NexusError(refuse_existing(path)) from None
        raise
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        # Ours alone to remove: the file this call created (same inode), never another one.
        with contextlib.suppress(OSError):
            mine = os.fstat(fd)
            there = os.lstat(path)
            if (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino):
                os.unlink(path)
        raise
    finally:
        os.close(fd)


@click.command(name="report", context_settings={"help_option_names": ["-h", "--help"]}, help=REPORT_HELP)
@click.argument("run")
@click.option(
    "--format", "form", type=click.Choice(FORMATS), default="markdown", show_default=True, help="The report's format."
)
@click.option("-o", "--output", metavar="FILE", help="Write the report to FILE, a new file (0600).")
@click.option("-d", "--directory", default=".", metavar="PATH", help="Project directory (default: the current one).")
def report_command(run: str, form: str, output: str | None, directory: str) -> None:
    try:
        report = build_report(directory, run)
        data = render(report, form).encode("utf-8")
        if output is not None:
            write_new_file(output, data, root_of(directory))
        else:
            write_bytes(sys.stdout, data)
    except NexusError as error:
        refuse(error, False)
    except OSError as error:
        refuse(NexusError(error_message(error)), False)
    except Exception as error:  # a bug of ours: still a clean error line, never a traceback
        refuse(
            NexusError(f"Internal error ({type(error).__name__}: {error}); nothing was changed.", "Please report it."),
            False,
        )


def report_main(argv: list[str]) -> NoReturn:
    """``nexus report ...``: argv starts with the command name."""
    run_click(report_command, argv[1:], "nexus report")
