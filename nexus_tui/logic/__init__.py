"""What the dashboard knows and decides, without widgets: the model of a project, the actions,
the recovery situations, the demo. Nothing here imports textual or rich (a test proves it)."""
