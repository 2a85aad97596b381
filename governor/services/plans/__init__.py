"""Preflight plans: the plan document, a plan judged against the budget's real money and the
GPUs' free memory, its verdict kept and its money reserved, and canary releases.

May use: `governor.domain`, `governor.db`, `money`, `monitoring`, `security`, and the shared
modules.
"""
