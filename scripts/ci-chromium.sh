#!/usr/bin/env bash
# Make sure headless Chromium is there for the test that renders the HTML verdict
# report and checks its screenshot (tests/cli/test_report_html.py): installs the Debian
# packages chromium and fonts-dejavu-core (so the page's text has a font) with apt-get
# when chromium is missing and this is root. Not root and missing: says so, and that
# test skips (exit 0). A failing apt-get fails CI.
set -euo pipefail
log() { echo "ci-chromium: $*" >&2; }
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [[ "$(id -u)" -ne 0 ]]; then
  log "chromium is missing and installing it needs root: the HTML report's rendering test will skip"
  exit 0
fi
log "installing chromium with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
