"""What auditors run: verification of a receipt, a bundle, a commit or the chain
(`_verification`), the population of changes in a period (`_population`), and pass@k
over repeated trials (`_stats`).
"""
