"""``python -m nexus_tui``: the ``nexus-tui`` command (how ``nexus-tui serve`` starts its sessions)."""

from .cli import main

raise SystemExit(main())
