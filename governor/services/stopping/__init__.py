"""Stopping: the enforcement pass (each pod's situation built, the policy's decision acted on)
and the stop orders carried out (the job's save first, then the provider's preserving stop).

May use: `governor.domain`, `governor.db`, `runs`, `plans`, `money`, `monitoring`, `replica`,
`security`, and the shared modules.
"""
