"""``make demo``: a whole data-use dispute on Fashion-MNIST through the ``twinaudit`` CLI.

``python -m demo [--data PATH] [--out RUN_DIR] [--quick]``; see :mod:`demo.run`.

The package also holds the small public pieces that experiments (the benchmarks in
``bench/``, the tests) are built from, none downloaded and all seeded:
:mod:`demo.synthetic` (twin-marked synthetic images), :mod:`demo.tiny_cnn` (a tiny
CNN and its deterministic trainer, ``--arch demo.tiny_cnn:TinyCNN``),
:mod:`demo.pairset` (committed pairs in memory) and :mod:`demo.seeded` (seeded
stand-ins for the arbiter's entropy and the owner's salts).
"""
