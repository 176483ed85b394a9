#!/bin/sh
# Regenerates manent_plugin/_proto (committed) from ../../proto and ./proto.
# Needs protoc on PATH and grpclib installed in the Python that runs this (it ships
# protoc-gen-grpclib_python): e.g. `PYTHON=.venv/bin/python ./regen.sh`.
set -eu
cd "$(dirname "$0")"
exec "${PYTHON:-python3}" tools/regen.py "$@"
