"""nexus-tui: read-only Textual dashboard over the nexus registry state."""
