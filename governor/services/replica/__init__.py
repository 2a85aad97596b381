"""This replica: whether it leads the periodic passes (the lease), whether its writes commit,
the liveness of its passes and its readiness, and the notices its webhooks never got.

May use: `governor.domain`, `governor.db`, `security` (its fixed windows), and the shared
modules (`events`, `notifications`).
"""
