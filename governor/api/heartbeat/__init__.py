"""The heartbeat, the busiest route by far: its route (`heartbeat`, and the plain beats'
group, `heartbeats`), served lean and in groups (`lean`, `batches`). Its statements and
their group commit are `governor.db.heartbeats`; what it decides, `governor.services.jobs`.
"""
