"""The ledger's storage: the chain logic once (`_ledger`: append, checkpoint, read) over
one driver interface (`_backend`, each method's MUST and MUST NOT), with two drivers:
SQLite embedded (`_sqlite`) and PostgreSQL shared (`_postgres`). Also blob spooling, mirrors
of a shared store, head repair, retention and the trust file a new ledger pins its admin
in (`_trust_file`). Nothing here decides a verdict.
"""
