"""``make demo``: a whole data-use dispute on Fashion-MNIST through the ``twinaudit`` CLI.

``python -m demo [--data PATH] [--out RUN_DIR] [--quick]``; see :mod:`demo.run`.
"""
