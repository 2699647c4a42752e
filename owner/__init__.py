"""The data owner's side: mark her items, keep the vault, escrow, publish, claim.

- :mod:`.kinds` — the item kinds (image, text, captioned image), each with its mark,
  publish and inspect handlers; :mod:`.mark`, :mod:`.marking`, :mod:`.images`,
  :mod:`.text`, :mod:`.captioned` — making the two versions of every item;
- :mod:`.vault` — the private vault that keeps both versions, their salts and the
  claim key; :mod:`.publish` — the version of each pair the arbiter's draw selects;
- :mod:`.escrow_client` and :mod:`.claim_client` — escrowing the commitments with the
  arbiter and filing a claim (answering its opening requests), over the wire;
- :mod:`.inspect` — what the marks look like, and what they change.

It imports neither the arbiter's code nor the practitioner's (docs/architecture.md).
"""
