"""``python -m ledger``: the ``ledger`` command."""

from ._entry import main

main()
