"""``python -m nexus_core.cli``: the same command as ``nexus``."""

from nexus_core.cli.main import main

if __name__ == "__main__":  # walking the package (tests/test_core_purity.py) imports it too
    main()
