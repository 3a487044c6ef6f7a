"""Durable scheduled re-checks: ``nexus schedule`` (the operator's commands) and ``nexus
scheduler`` (the runner), on one SQLite database per project.

``rules``: when a schedule fires (intervals, daily/weekly times, cron, one-off; IANA zones and
daylight saving). ``db``: the database file, its checks and migrations. ``core``: schedules and
occurrences (claims, catch-up, dead runners). ``runner``: the scheduler loop. ``command``: the
command line.
"""

DB_REL = ".bmad-plus/nexus/schedules.sqlite3"  # here, import-free: inspect checks for it cheaply
