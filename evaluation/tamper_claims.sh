#!/usr/bin/env bash
# Two verdicts made the same way for `python -m evaluation.tamper` (see docs/security.md):
# one arbiter, one vault of 120 synthetic twin pairs (Bernoulli marks, epsilon 48), one
# tiny CNN trained on what was published and served twice with `oracle serve`, once
# with an answer key (spec §10.8) and once without; a C1 claim against each, and the
# owner's openings of each verdict's pairs. Everything is seeded except the arbiter's
# keys and randomness. Usage: evaluation/tamper_claims.sh DIR [CLAIM-ARGS...] (DIR must
# not exist; CLAIM-ARGS, such as --perturbation dither --k 1, join both owner claims).
set -euo pipefail
dir=$1
shift
claim_args=("$@")
mkdir "$dir"
tw() { python -m twinaudit "$@"; }
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
serve() {  # serve LOGFILE ARGS...: start a server; its address goes into $address
    local log=$1; shift
    python -m twinaudit "$@" >"$log" 2>"$log.err" &
    pids+=($!)
    for _ in $(seq 600); do
        if grep -qE 'serving on|listening on' "$log"; then break; fi
        sleep 0.2
    done
    address=$(grep -oE '(serving|listening) on [^ ]+' "$log" | awk '{print $3}')
}
tw verifier keygen --key "$dir/arbiter.key" -q
serve "$dir/arbiter.log" verifier serve --listen 127.0.0.1:0 \
    --db "$dir/escrow.db" --key "$dir/arbiter.key"
arbiter=$address
python - "$dir" <<'PY'
import json, sys
from pathlib import Path
import numpy as np
from tests.support.data import synthetic_images
out = Path(sys.argv[1])
raw, labels = synthetic_images(120, seed=21)
np.save(out / "photos.npy", raw)
(out / "labels.json").write_text(json.dumps([int(y) for y in labels]))
PY
tw owner mark "$dir/photos.npy" --labels "$dir/labels.json" --out "$dir/vault" \
    --marker bernoulli --epsilon 48 --seed "tamper" -q
tw owner escrow "$dir/vault" --arbiter "$arbiter" --arbiter-key "$dir/arbiter.key.pub" \
    --owner tamper -q
tw owner publish "$dir/vault" --out "$dir/pub" -q
python - "$dir" <<'PY'
import json, sys
from pathlib import Path
import numpy as np
import torch
from tests.support.models import train_classifier
out = Path(sys.argv[1])
published = np.load(out / "pub" / "photos.npy")
labels = np.array(json.loads((out / "labels.json").read_text()))
model = train_classifier(published, labels, epochs=40, seed=0, width=16)
torch.save(model.state_dict(), out / "model.pt")
PY
tw oracle keygen --key "$dir/answers.key" -q
for kind in signed unsigned; do
    extra=(); [ "$kind" = signed ] && extra=(--answer-key "$dir/answers.key")
    serve "$dir/oracle-$kind.log" oracle serve --model "$dir/model.pt" \
        --arch tests.support.models:tiny_cnn_16 --n-classes 10 --threads 1 \
        --listen 127.0.0.1:0 "${extra[@]}"
    oracle=$address
    tw owner claim "$dir/vault" --arbiter "$arbiter" --arbiter-key "$dir/arbiter.key.pub" \
        --oracle "$oracle" --model-name "tiny-cnn-$kind" --knowledge C1 "${claim_args[@]}" \
        --out "$dir/$kind" -q || true  # exit 1 is NOT DETECTED, still a verdict
    tw owner openings "$dir/vault" --verdict "$dir/$kind/verdict.json" \
        --arbiter-key "$dir/arbiter.key.pub" --out "$dir/$kind/openings.bin" -q
done
