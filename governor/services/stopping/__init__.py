"""Stopping: the enforcement pass (each pod's situation built, the policy's decision acted on)
and the stop orders carried out (the job's save first, then the provider's preserving stop);
a pod's state as its provider reports it, one the provider does not document recorded and told.

May use: `governor.domain`, `governor.db`, `runs`, `plans`, `money`, `monitoring`, `replica`,
`security`, and the shared modules.
"""
