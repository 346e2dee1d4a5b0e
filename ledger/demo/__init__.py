"""`ledger demo`: the whole ladder on a throwaway repository (`_demo`), with a scripted
example judge (`_judge`, run as ``python -m ledger.demo._judge``).
"""
