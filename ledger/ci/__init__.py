"""The gate CI runs before a merge (`_gate`) and the GitHub action's entry point
(`_github`): events, tiers with the runner's secrets, the summary and the comment.
"""
