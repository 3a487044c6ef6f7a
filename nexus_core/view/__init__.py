"""The project view: what the dashboard shows of one project (``model``: ProjectScanner,
ProjectSnapshot, RunView, TaskRow, LockView), its JSON encoding (``codec``) and ``nexus observe``,
which streams it (``observe_command``). Pure Python: the remote host needs only the ``nexus`` CLI."""
