"""The claim protocol (spec §7.1, §10–§12), torch-free: one module per spec section.

=================  ===========================================================
spec section       module
=================  ===========================================================
§7.1               :mod:`.outcome` — a pair's outcome from its two scores, the one
                   rule the claim engine and replay share
§10.1              :mod:`.params` — the owner's claim parameters (:class:`ClaimParams`)
§10.1              :mod:`.claim_map` — the claim map a transcript and a verdict carry
§10.1, §10.3–10.6  :mod:`.functions` — the table of score functions
§10.2 step 2       :mod:`.order` — the opening order, pairs of earlier claims excluded
§10.2 step 3       :mod:`.schedule` — the window schedule
§10.7              :mod:`.filing` — claim requests; :mod:`.restart` — running a failed
                   claim again, and the recount of a record's claims
§10.1              :mod:`.scores.knowledge` — knowledge words, resolved to C1–C4
§10.3              :mod:`.scores.classifier` — the image-classifier score, whole: its
                   parameters, the C1–C4 table and the score of a version's answers
§10.3, §10.4       :mod:`.scores.perturbations` — the perturbation families' names
§10.4              :mod:`.scores.encoder`
§10.5, §10.6       :mod:`.scores.function_only`
§11                :mod:`.verdict` — the verdict payload, built, and checked once into a
                   typed, immutable :class:`~.verdict.Verdict`
§12                :mod:`.transcript` — transcript records and their hash chain
=================  ===========================================================

What needs numpy's image code or the model — drawing the copies, asking the oracle,
the other functions' scores, the claim session — is the verifier's
(``twinaudit.verifier.claim``, ``twinaudit.verifier.scoring``,
``twinaudit.verifier.windows``, ``twinaudit.verifier.replay``), which scores the
image classifier's answers with :mod:`.scores.classifier`.
"""
