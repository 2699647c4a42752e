#!/usr/bin/env bash
# Make sure bubblewrap is there: an arbiter runs held models (and anything loaded with
# --trust-pickle) inside it (verifier/oracles/sandbox.py), and the tests that start held
# models need it (tests/verifier/test_held_isolation.py reproduces issue #40's N4 and N5
# inside it). Installs the Debian package bubblewrap with apt-get when bwrap is missing
# and this is root. Not root and missing: says so, and those tests skip (exit 0). A
# failing apt-get fails CI.
set -euo pipefail
log() { echo "ci-sandbox: $*" >&2; }
if command -v bwrap >/dev/null 2>&1; then
  exit 0
fi
if [[ "$(id -u)" -ne 0 ]]; then
  log "bwrap is missing and installing it needs root: the held-model tests will skip"
  exit 0
fi
log "installing bubblewrap with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends bubblewrap >&2
