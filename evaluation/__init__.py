"""The evaluation harness: the paper's classifier experiments, reproduced with twinaudit.

``python -m evaluation TABLE`` (see :mod:`evaluation.__main__`) trains the models a
table needs (:mod:`evaluation.build`), runs the claims in-process with the verifier's
claim engine (:mod:`evaluation.audit`) and rewrites ``docs/results.md``
(:mod:`evaluation.report`, :mod:`evaluation.tables`), next to the paper's figures
(:mod:`evaluation.paper`).
"""
