"""GPU telemetry sources: NVML, and a fake NVML driver layer for machines without GPUs."""
