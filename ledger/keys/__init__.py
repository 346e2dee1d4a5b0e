"""Keys and who may sign: private key files (`_key_files`), the SSH agent as a signer
(`_ssh_agent`), keyring changes signed by an admin (`_keyring`), and the trust root a
command verifies against (`_trust`); and `ledger init`, a new ledger and its admin key
(`_init`).
"""
