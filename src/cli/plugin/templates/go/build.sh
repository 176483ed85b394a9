#!/bin/sh
# Builds ./manent-plugin-{{name}} offline: in GOPATH mode, with Debian's Go packages
# (golang-github-hashicorp-go-plugin-dev and what it depends on, in /usr/share/gocode) and manent's
# Go SDK from {{sdk}}/sdk/go — no module proxy, no go.sum. With network access, `go mod tidy &&
# go build -o manent-plugin-{{name}} .` works as well (go.mod points at the same SDK).
set -eu
# The SDK: MANENT_GO_SDK (relative to where you are), or the checkout `plugin new` was given.
sdk=${MANENT_GO_SDK:-{{sdk_sh}}/sdk/go}
sdk=$(cd "$sdk" && pwd)
cd "$(dirname "$0")"
here=$(pwd)
ws=$(mktemp -d)
trap 'rm -rf "$ws"' EXIT
mkdir -p "$ws/src/manent.dev/sdk"
ln -s "$sdk" "$ws/src/manent.dev/sdk/go"
ln -s "$here" "$ws/src/manent-plugin-{{name}}"
cd "$ws/src/manent-plugin-{{name}}"
GO111MODULE=off GOPATH="$ws:/usr/share/gocode" GOFLAGS= go build -o "$here/manent-plugin-{{name}}" .
GO111MODULE=off GOPATH="$ws:/usr/share/gocode" GOFLAGS= go vet .
echo "wrote $here/manent-plugin-{{name}}"
