"""The log's transparency: signed checkpoints and the proofs given out against them
(`_proofs`), RFC 3161 time-stamps (`_tsa`), and witnesses that cosign (`_witness`).
"""
