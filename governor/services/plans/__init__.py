"""Preflight plans: the plan document, a plan judged against the budget's real money and the
GPUs' free memory, its verdict kept and its money reserved, canary holds and releases, and its
pods' rates and spend kept to what it quoted.

May use: `governor.domain`, `governor.db`, `money`, `monitoring`, `security`, and the shared
modules.
"""
