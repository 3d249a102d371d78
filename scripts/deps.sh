#!/bin/sh
# deps.sh - installs the Debian packages memplan needs to build and test, if missing.
set -eu
PKGS="build-essential cmake pkg-config libprotobuf-c-dev protobuf-c-compiler libonnx-dev check \
libglpk-dev libgraphviz-dev libopenblas-dev chromium"
# chromium: tests/test_report_chromium.c opens the --report page headless (skipped when absent)
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
