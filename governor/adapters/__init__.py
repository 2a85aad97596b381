"""Adapters: the outside world (providers, GPUs, notifications) behind the domain's ports."""
