"""``python -m grpo``: the ``grpo`` command (``grpo.cli.main``)."""

from grpo.cli import main

main()
