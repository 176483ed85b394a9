#!/bin/sh
# Makes .venv with manent's Python SDK and writes ./manent-plugin-{{name}}: the executable manent
# starts. manent clears a plugin's environment, so the executable names the venv's python by its
# absolute path.
set -eu
# The SDK: MANENT_PYTHON_SDK (relative to where you are), or the checkout `plugin new` was given.
sdk=${MANENT_PYTHON_SDK:-{{sdk_sh}}/sdk/python}
sdk=$(cd "$sdk" && pwd)
cd "$(dirname "$0")"
python3 -m venv .venv
# pip builds a local package inside its directory (build/, *.egg-info): build a copy in a
# temporary directory instead, so the SDK's checkout is left as it is (and may be read-only).
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
cp -R "$sdk/." "$build/"
rm -rf "$build/build" "$build"/*.egg-info
.venv/bin/pip install --quiet "$build"
here=$(pwd)
# A shebang line ends its interpreter's path at the first space, so the executable is a shell
# script that starts the venv's python by its absolute path, quoted whatever characters the
# path holds (a ' becomes '\''). -I: no module is taken from the directory manent runs in
# (another user may write there) nor from PYTHON* variables; the plugin's own directory is
# put first on the path instead.
quoted=$(printf '%s' "$here" | sed "s/'/'\\\\''/g")
{
  printf '#!/bin/sh\n'
  printf "exec '%s/.venv/bin/python' -I -c '%s' '%s' \"\$@\"\n" "$quoted" \
    'import sys; sys.path.insert(0, sys.argv.pop(1)); from plugin import factory; from manent_plugin import serve; serve(factory)' \
    "$quoted"
} > manent-plugin-{{name}}
chmod 755 manent-plugin-{{name}}
echo "wrote $here/manent-plugin-{{name}}"
