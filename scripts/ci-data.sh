#!/usr/bin/env bash
# Make sure the Debian package dataset-fashion-mnist is installed, so the tests that
# need a real dataset (the quick demo, the evaluation harness) run in CI instead of
# being skipped. Installs it with apt-get when missing and running as root; otherwise
# says why it did not and leaves those tests to skip (exit 0 either way).
set -euo pipefail
DIR=/usr/share/datasets/fashion-mnist
if [[ -f "$DIR/train-images-idx3-ubyte.gz" ]]; then
  exit 0
fi
if [[ "$(id -u)" -ne 0 ]]; then
  echo "ci-data: $DIR is missing and this is not root: tests needing Fashion-MNIST will skip" >&2
  exit 0
fi
echo "ci-data: installing dataset-fashion-mnist" >&2
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist >&2
