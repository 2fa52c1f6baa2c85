"""Test helpers shared by tests/e2e and tests/integration (importable as `helpers.*`: tests/ is on sys.path)."""
