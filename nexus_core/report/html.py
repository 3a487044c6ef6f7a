"""The report as one self-contained HTML page: inline CSS, an inline SVG of the run's timeline
(``nexus_core.timeline``: the dashboard's lanes, bars, marks and ticks, drawn in pixels), the
task table, the failed checks with their output's tail, what needs a person.

Nothing is loaded from anywhere (no URL, no script, no event handler; a Content-Security-Policy
of ``default-src 'none'`` says so to the browser too). Every string from the state is
HTML-escaped (quotes included) after ``terminal_safe``.
"""

from __future__ import annotations

import html

from ..terminal import terminal_safe
from ..timeline import (
    AFTER,
    HEAD,
    MARKS,
    OVERDUE,
    PRIORITY,
    STALE_SPAN,
    Bar,
    Lane,
    Mark,
    Timeline,
    tick_label,
    tick_step,
    ticks,
)
from . import GENERATOR, FailedCheck, Need, Report, TaskLine
from .markdown import HEADLINE


def esc(value: object) -> str:
    return html.escape(terminal_safe(value), quote=True)


# Theme roles as CSS colours (the dashboard's default theme, textual-dark, on a light page).
CSS = """
:root { --success: #2e8b57; --error: #c0392b; --warning: #d68910; --accent: #b9770e;
        --primary: #0b6fb8; --dim: #8a8f98; --ink: #1d2329; --paper: #ffffff; --rule: #d5d9de; }
body { font: 14px/1.45 system-ui, sans-serif; color: var(--ink); background: var(--paper);
       margin: 24px auto; max-width: 1000px; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.summary { color: #444; margin: 0 0 12px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--rule); vertical-align: top; }
th { font-weight: 600; background: #f4f6f8; }
code, pre, .mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
pre { background: #f4f6f8; border: 1px solid var(--rule); padding: 8px; overflow-x: auto;
      white-space: pre-wrap; word-break: break-all; }
.state-done { color: var(--success); font-weight: 600; }
.state-operator, .state-budget { color: var(--error); font-weight: 600; }
.state-unfinished { color: var(--primary); } .state-moving { color: var(--warning); }
.state-waiting { color: var(--dim); }
svg { display: block; margin: 8px 0; }
svg text { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; fill: var(--ink); }
svg .axis { stroke: var(--rule); } svg .tick { fill: var(--dim); font-size: 11px; }
svg .now, svg .after { stroke: var(--dim); stroke-dasharray: 2 3; }
svg .stale { stroke: var(--error); stroke-dasharray: 4 3; }
.c-success { fill: var(--success); } .c-error { fill: var(--error); } .c-warning { fill: var(--warning); }
.c-accent { fill: var(--accent); } .c-primary { fill: var(--primary); } .c-dim { fill: var(--dim); }
.s-success { stroke: var(--success); } .s-error { stroke: var(--error); } .s-warning { stroke: var(--warning); }
.s-accent { stroke: var(--accent); }
.legend { color: #444; } .legend span { margin-right: 14px; white-space: nowrap; }
footer { color: var(--dim); margin-top: 28px; font-size: 12px; }
"""

WIDTH = 960
LABEL = 180
ROW = 22
TOP = 30
PIXELS_PER_CHAR = 7
# Bar fills: a shape per execution (readable in monochrome), the colour of its theme role.
FILL = {"█": "solid", "▓": "dense", "▚": "checker", "░": "sparse"}


def _role(colour: str) -> str:
    """ "$success" -> "success" (a CSS class suffix); "dim" and "" -> "dim"/"ink"."""
    return colour.lstrip("$").split()[-1] if colour.strip() else "ink"


def _patterns() -> str:
    """One pattern per fill and role: diagonal lines (running), checks (blocked), dots (failed),
    crosses (overdue)."""
    out = []
    for role in ("success", "warning", "error", "accent"):
        out.append(
            f'<pattern id="dense-{role}" width="4" height="4" patternUnits="userSpaceOnUse">'
            f'<rect width="4" height="4" class="c-{role}" opacity="0.35"/>'
            f'<path d="M0 4 L4 0" class="s-{role}" stroke-width="1.6"/></pattern>'
            f'<pattern id="checker-{role}" width="6" height="6" patternUnits="userSpaceOnUse">'
            f'<rect width="3" height="3" class="c-{role}"/><rect x="3" y="3" width="3" height="3" class="c-{role}"/>'
            f"</pattern>"
            f'<pattern id="sparse-{role}" width="5" height="5" patternUnits="userSpaceOnUse">'
            f'<circle cx="2.5" cy="2.5" r="1.2" class="c-{role}"/></pattern>'
            f'<pattern id="cross-{role}" width="6" height="6" patternUnits="userSpaceOnUse">'
            f'<path d="M0 0 L6 6 M6 0 L0 6" class="s-{role}" stroke-width="1.2"/></pattern>'
        )
    return "<defs>" + "".join(out) + "</defs>"


class _Scale:
    def __init__(self, start_ms: int, end_ms: int) -> None:
        self.start_ms = start_ms
        self.end_ms = end_ms
        self.ms_per_px = max(end_ms - start_ms, 1) / (WIDTH - LABEL - 16)

    def x(self, ms: int) -> float:
        return round(LABEL + (ms - self.start_ms) / self.ms_per_px, 1)


def _body(bar: Bar, scale: _Scale, y: int, end_ms: int, accepted_ms: int | None) -> list[str]:
    body = bar.body()
    role = _role(body.colour)
    fill = FILL.get(body.glyph, "solid")
    paint = f'class="c-{role}"' if fill == "solid" else f'fill="url(#{fill}-{role})"'
    x0, x1 = scale.x(bar.start_ms), scale.x(end_ms)
    overdue_from = bar.deadline_ms if bar.deadline_ms is not None and bar.deadline_ms < end_ms else None
    split = scale.x(overdue_from) if overdue_from is not None else x1
    out = [f'<rect x="{x0}" y="{y + 5}" width="{max(split - x0, 2):.1f}" height="{ROW - 10}" {paint}/>']
    if overdue_from is not None:
        out.append(
            f'<rect x="{split}" y="{y + 5}" width="{max(x1 - split, 2):.1f}" height="{ROW - 10}" '
            f'fill="url(#cross-{_role(OVERDUE.colour)})"/>'
        )
    if bar.end_ms is None:
        out.append(_glyph(HEAD.glyph, HEAD.colour, x1 + 5, y, "still running"))
    after = max(bar.last_ms(), accepted_ms or 0)
    if after > end_ms:
        out.append(f'<line x1="{x1}" x2="{scale.x(after)}" y1="{y + ROW // 2}" y2="{y + ROW // 2}" class="after"/>')
    return out


def _glyph(glyph: str, colour: str, x: float, y: int, title: str) -> str:
    return (
        f'<text x="{x}" y="{y + ROW - 6}" text-anchor="middle" class="c-{_role(colour)}">'
        f"<title>{esc(title)}</title>{esc(glyph)}</text>"
    )


def _lane(lane: Lane, index: int, scale: _Scale, open_end: int) -> list[str]:
    y = TOP + index * ROW
    label = ("  " * min(lane.depth, 4)) + ("└ " if lane.depth else "") + lane.task_id
    out = [f'<text x="6" y="{y + ROW - 6}" xml:space="preserve">{esc(label)}</text>']
    marks: list[Mark] = []
    for index, bar in enumerate(lane.bars):
        end = bar.end_ms if bar.end_ms is not None else open_end
        last = lane.accepted_ms if index == len(lane.bars) - 1 and lane.accepted_ms is not None else None
        out.extend(_body(bar, scale, y, end, last))
        marks.extend(m for m in bar.marks if m.kind != "deadline" or bar.end_ms is None or end > m.at_ms)
    if lane.accepted_ms is not None:
        marks.append(Mark(lane.accepted_ms, "accepted"))
    since = lane.evidence_ms() if lane.stale else None
    if since is not None:
        out.append(f'<line x1="{scale.x(since)}" x2="{scale.x(open_end)}" y1="{y + 11}" y2="{y + 11}" class="stale"/>')
        marks.append(Mark(open_end, "stale"))
    for mark in sorted(marks, key=lambda m: (PRIORITY[m.kind], m.at_ms)):
        shape = MARKS[mark.kind]
        out.append(_glyph(shape.glyph, shape.colour, scale.x(mark.at_ms), y, shape.words))
    return out


def timeline_svg(timeline: Timeline) -> str:
    """The timeline as inline SVG: the same facts and glyphs as the dashboard's view, an open
    bar drawn to the right edge (a report has no "now")."""
    if timeline.first_ms is None or timeline.last_ms is None:
        return "<p>No attempt yet.</p>"
    # An open bar runs to the right edge; past its deadline when inspect says it is overdue.
    overdue = [
        bar.deadline_ms
        for lane in timeline.lanes
        if lane.overdue
        for bar in lane.bars
        if bar.end_ms is None and bar.deadline_ms is not None
    ]
    last = max([timeline.last_ms, *overdue])
    span = max(last - timeline.first_ms, 60_000)
    start = timeline.first_ms - span // 40
    open_end = last + span // 20
    scale = _Scale(start, open_end + span // 40)
    height = TOP + ROW * len(timeline.lanes) + 8
    out = [
        f'<svg width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="Timeline of run {esc(timeline.run_id)}">',
        _patterns(),
    ]
    step = tick_step(scale.ms_per_px, PIXELS_PER_CHAR, 4)
    for moment in ticks(start, scale.end_ms, step):
        x = scale.x(moment)
        out.append(f'<line x1="{x}" x2="{x}" y1="{TOP - 6}" y2="{height - 4}" class="axis"/>')
        label = tick_label(moment, step)
        if x + 3 + len(label) * PIXELS_PER_CHAR <= WIDTH:  # a label cut at the edge is left out
            out.append(f'<text x="{x + 3}" y="{TOP - 10}" class="tick">{esc(label)}</text>')
    out.append(f'<line x1="{LABEL}" x2="{WIDTH - 8}" y1="{TOP - 6}" y2="{TOP - 6}" class="axis"/>')
    for index, lane in enumerate(timeline.lanes):
        out.extend(_lane(lane, index, scale, open_end))
    out.append("</svg>")
    return "\n".join(out)


def legend_html() -> str:
    seen: dict[str, list[tuple[str, str]]] = {}
    from ..timeline import BODIES

    for shape in [*BODIES.values(), HEAD, OVERDUE, STALE_SPAN, AFTER, *MARKS.values()]:
        glyphs = seen.setdefault(shape.words, [])
        if shape.glyph not in [g for g, _ in glyphs]:
            glyphs.append((shape.glyph, shape.colour))
    spans = []
    for words, glyphs in seen.items():
        marks = "".join(f'<b class="mono" style="color: var(--{_role(c)})">{esc(g)}</b>' for g, c in glyphs)
        spans.append(f"<span>{marks} {esc(words)}</span>")
    return f'<p class="legend">{"".join(spans)}</p>'


def _row(line: TaskLine) -> str:
    note = line.detail or line.summary or ""
    cells = [
        f"<td><b>{esc(line.task_id)}</b></td>",
        f'<td class="state-{esc(line.category)}">{esc(line.state)}</td>',
        f"<td>{line.attempts_used}/{line.max_attempts}</td>",
        f"<td>{esc(line.execution)}</td><td>{esc(line.verification)}</td><td>{esc(line.acceptance)}</td>",
        f"<td><code>{esc(note)}</code></td>" if note else "<td></td>",
    ]
    return "<tr>" + "".join(cells) + "</tr>"


def _failed(check: FailedCheck) -> str:
    parts = [f"$ {check.command}"] if check.command else []
    for name, output in (("stdout", check.stdout_tail), ("stderr", check.stderr_tail)):
        if output:
            parts.extend((f"--- {name} (tail)", output))
    return (
        f"<h3><b>{esc(check.task_id)}</b>, attempt {check.attempt} of {check.attempts}, check "
        f"<code>{esc(check.check_id)}</code>: {esc(check.words())}</h3>\n<pre>{esc(chr(10).join(parts))}</pre>"
    )


def _need(need: Need) -> str:
    who = esc(need.task_id) if need.task_id is not None else "the run's locks"
    detail = f": <code>{esc(need.detail)}</code>" if need.detail else ""
    return f"<li><b>{who}</b>: {esc(need.state)}{detail}</li>"


def render_html(report: Report) -> str:
    total = len(report.tasks)
    checks = len(report.failed)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>Nexus run {esc(report.run_id)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>Nexus run {esc(report.run_id)}: {esc(HEADLINE.get(report.outcome, report.outcome))}</h1>",
        f'<p class="summary"><b>{report.accepted} of {total} tasks accepted</b> · {len(report.needs)} need a person · '
        f"{checks} failed check{'s' if checks != 1 else ''} · sequence {report.sequence} · "
        f"last update {esc(report.updated_at)}</p>",
        '<p class="summary">States: ' + " · ".join(f"{esc(state)} {count}" for state, count in report.counts) + "</p>",
        "<h2>Timeline (UTC)</h2>",
        timeline_svg(report.timeline),
        legend_html(),
        "<h2>Tasks</h2>",
        "<table><thead><tr><th>Task</th><th>State</th><th>Tries</th><th>Execution</th><th>Verification</th>"
        "<th>Acceptance</th><th>Detail</th></tr></thead><tbody>",
        *(_row(line) for line in report.tasks),
        "</tbody></table>",
    ]
    if report.failed:
        out.append("<h2>Failed checks</h2>")
        out.extend(_failed(check) for check in report.failed)
    out.append("<h2>Needs a person</h2>")
    if report.needs:
        out.append("<ul>" + "".join(_need(need) for need in report.needs) + "</ul>")
    else:
        out.append("<p>Nothing: no task waits for a decision.</p>")
    out.extend((f"<footer>{esc(GENERATOR)}, from the run state; read-only.</footer>", "</body>", "</html>", ""))
    return "\n".join(out)
