"""Periodic work: run_once tasks and the driver that runs them."""
