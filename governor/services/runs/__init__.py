"""Runs: a job's run started on a pod (with its own token, under its plan's verdict), what its
job reports on it, the runs that end with their pod, and an operator's acknowledgement of a
lost one.

May use: `governor.domain`, `governor.db`, `plans`, `money`, `security`, and the shared
modules.
"""
