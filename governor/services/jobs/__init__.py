"""What a job says: its heartbeat (recorded, answered with the directive the policy left for
it) and the training health judged on its metrics.

May use: `governor.domain`, `governor.db`, `stopping`, `runs`, `plans`, `money`,
`monitoring`, `replica`, `security`, and the shared modules.
"""
