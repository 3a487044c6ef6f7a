"""A project's state on disk: run files (store: the checksummed envelope, atomic writes), the
JSON encoding every hash is taken over (canonical), writer.lock and recovery.lock (locks), and
the rule that state directories are their user's alone (state_dirs)."""
