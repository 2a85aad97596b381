"""Money: a budget's book (its rows, ledger totals and figures as of one instant), the meter
that writes the ledger, reconciliation with the provider's bill, and budget extensions.

May use: `governor.domain`, `governor.db`, `security`, `monitoring`, and the shared modules.
"""
