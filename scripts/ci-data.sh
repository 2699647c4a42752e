#!/usr/bin/env bash
# Make sure the Debian data packages the tests use are installed, so those tests run in
# CI instead of being skipped: dataset-fashion-mnist (the quick demo, the evaluation
# harness) and mythes-en-us (the thesaurus of text marking). Installs what is missing
# with apt-get when running as root; otherwise says why it did not and leaves those
# tests to skip (exit 0 either way).
set -euo pipefail
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
