"""The ``twinaudit`` command: argument parsing and printing over the role packages.

:func:`twinaudit.cli.main.main` is the console script; each ``cmd_*`` module holds one
command group and imports its heavy modules only when it runs.
"""
