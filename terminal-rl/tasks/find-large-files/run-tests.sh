#!/bin/bash
# Runs this task's tests and writes pytest's JUnit XML report, which the harness reads for the reward.
# The harness sets PYTHON (an interpreter with pytest), TEST_DIR and JUNIT_XML; in a Docker image with python3
# and pytest the defaults below apply.
set -u
PY="${PYTHON:-python3}"
TEST_DIR="${TEST_DIR:-/tests}"
exec "$PY" -m pytest -rA -p no:cacheprovider --junitxml="${JUNIT_XML:-$TEST_DIR/junit.xml}" "$TEST_DIR/test_outputs.py"
