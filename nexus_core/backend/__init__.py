"""The process backend: launch and collect (process), one verification check run with its
minimal environment (checks), and how a child is stopped with everything it started
(process_group)."""
