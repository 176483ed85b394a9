#!/bin/sh
# Makes .venv with manent's Python SDK and writes ./manent-plugin-{{name}}: the executable manent
# starts. manent clears a plugin's environment, so the executable names the venv's python by its
# absolute path.
set -eu
cd "$(dirname "$0")"
python3 -m venv .venv
.venv/bin/pip install --quiet "${MANENT_PYTHON_SDK:-{{sdk}}/sdk/python}"
here=$(pwd)
# The directory as a Python string literal, whatever characters its path holds.
literal=$(.venv/bin/python -c 'import sys; print(repr(sys.argv[1]))' "$here")
{
  printf '#!%s/.venv/bin/python\n' "$here"
  printf 'import sys\nsys.path.insert(0, %s)\n' "$literal"
  printf 'from plugin import factory\nfrom manent_plugin import serve\nserve(factory)\n'
} > manent-plugin-{{name}}
chmod 755 manent-plugin-{{name}}
echo "wrote $here/manent-plugin-{{name}}"
