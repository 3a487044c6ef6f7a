"""The modal screens: action dialogs, live progress, guided recovery, help."""
