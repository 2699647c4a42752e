#!/usr/bin/env bash
# The owner side at dataset scale (issue #5's figures): mark the first N Fashion-MNIST
# training images with each marker at the same epsilon, escrow with a local arbiter,
# publish, and inspect (epsilon over every pixel, feature distance of every pair with
# the same extractor, contact sheet). Usage: scripts/owner-fashion-mnist.sh [N] [RUN_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-6000}"
RUN="${2:-runs/owner-fashion-mnist}"
DATA="${TWINAUDIT_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}"
PY=.venv/bin/python
mkdir -p "$RUN"
# The first N images and labels, as idx.gz files like the originals.
$PY - "$DATA" "$RUN" "$N" <<'PYEOF'
import gzip, sys
from pathlib import Path
data, run, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
for kind, header, size in (("images-idx3", 16, 784), ("labels-idx1", 8, 1)):
    raw = gzip.open(data / f"train-{kind}-ubyte.gz").read()
    head = bytearray(raw[:header]); head[4:8] = n.to_bytes(4, "big")
    with gzip.GzipFile(run / f"train-{kind}-ubyte.gz", "wb", mtime=0) as out:
        out.write(bytes(head) + raw[header : header + n * size])
PYEOF
INPUT="$RUN/train-images-idx3-ubyte.gz"
$PY -m twinaudit verifier keygen --key "$RUN/arbiter.key" >/dev/null
$PY -m twinaudit verifier serve --listen 127.0.0.1:0 --db "$RUN/escrow.db" --key "$RUN/arbiter.key" >"$RUN/arbiter.log" 2>&1 &
ARBITER_PID=$!
trap 'kill $ARBITER_PID 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "serving on" "$RUN/arbiter.log" && break; sleep 0.2; done
ADDRESS="$(grep "serving on" "$RUN/arbiter.log" | awk '{print $NF}')"
for MARKER in pgd bernoulli gaussian; do
  VAULT="$RUN/vault-$MARKER"
  start=$(date +%s)
  $PY -m twinaudit owner mark "$INPUT" --out "$VAULT" --marker "$MARKER" --epsilon 10 --seed "fmnist-$MARKER"
  echo "mark $MARKER: $(( $(date +%s) - start )) s"
  $PY -m twinaudit owner escrow "$VAULT" --arbiter "$ADDRESS" --arbiter-key "$RUN/arbiter.key.pub" --owner "fmnist $MARKER"
  $PY -m twinaudit owner publish "$VAULT" --out "$RUN/public-$MARKER" --quiet
  $PY -m twinaudit owner inspect "$VAULT" --input "$INPUT" --extractor efficientnet-lite0 \
    --distance-pairs "$N" --sheet "$RUN/sheet-$MARKER.png" | tee "$RUN/inspect-$MARKER.txt"
done
