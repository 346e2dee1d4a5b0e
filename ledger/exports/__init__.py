"""What leaves the ledger for others to check: evidence bundles (`_bundle`) and in-toto and
SLSA statements in DSSE envelopes (`_intoto`).
"""
