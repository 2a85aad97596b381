"""What the GPUs and the runs report, kept: GPU telemetry (readings, peaks, the memory tracked
per phase and projected, lost GPUs), the runs' heartbeat metrics as time series, and the two
resolutions both are kept in.

May use: `governor.domain`, `governor.db`, and the shared modules (`context`, `events`).
"""
