"""gpu-governor: a budget governor for rented GPU pods."""

__version__ = "0.1.0"
