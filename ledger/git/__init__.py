"""Git as the receipts' road between machines: running git (`_commands`), receipt notes and
bundle refs on commits (`_notes`), and fetching and pushing them (`_sync`).
"""
