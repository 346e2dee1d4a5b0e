"""A task's entries on the ladder: contracts and their revisions, tier records by hand and
sealed receipts (`_records`), task events and effects, the agents' own records taken as
evidence (`_provenance`, `_traces`), the lifecycle status, and reading recorded evidence
back. The tier runners themselves are `ledger.tiers`.
"""
