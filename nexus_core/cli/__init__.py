"""The ``nexus`` command line: dispatch and help generated from the vocabulary (main), shell
completion, reading --plan/--input files (inputs), how output is written (output) and how a
refusal is printed (refusal). Nothing here is imported by the engine: imports run one way."""
