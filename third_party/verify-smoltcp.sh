#!/usr/bin/env bash
# Checks that third_party/smoltcp/src is the published smoltcp 0.14.0's src
# with both dyncore patches applied (third_party/README.md), and with
# `--write` regenerates the second patch from the tree.
#
#   third_party/verify-smoltcp.sh PUBLISHED [--write]
#
# PUBLISHED is the unpacked published crate, e.g. cargo's registry copy
# ~/.cargo/registry/src/*/smoltcp-0.14.0 (there after any build that uses
# smoltcp 0.14.0 from the registry, unpatched).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pub=${1:?usage: verify-smoltcp.sh PUBLISHED [--write]}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/a" "$tmp/b"
cp -r "$pub/src" "$tmp/a/src"
(cd "$tmp/a" && patch -s -p1 < "$here/smoltcp-0.14.0-rearm-timer.patch")
if [[ "${2:-}" == --write ]]; then
  cp -r "$here/smoltcp/src" "$tmp/b/src"
  (cd "$tmp" && diff -ruN a b || true) |
    sed 's/^\(--- a[^\t]*\)\t.*$/\1/; s/^\(+++ b[^\t]*\)\t.*$/\1/' > "$here/smoltcp-0.14.0-checkpoint.patch"
  echo "wrote $here/smoltcp-0.14.0-checkpoint.patch"
fi
(cd "$tmp/a" && patch -s -p1 < "$here/smoltcp-0.14.0-checkpoint.patch")
diff -r "$tmp/a/src" "$here/smoltcp/src"
echo "third_party/smoltcp/src = published 0.14.0 + rearm-timer + checkpoint patches"
