"""nexus_core: the durable task-run registry engine, byte-compatible with the BMAD+ reference."""

__version__ = "0.1.0"
