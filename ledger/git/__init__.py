"""Receipts in git, the receipts' road between machines: receipt notes and bundle refs on
commits (`_notes`), and fetching and pushing them (`_sync`). Running git itself is the
plumbing every room shares (`ledger._git`).
"""
