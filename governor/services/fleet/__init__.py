"""What is governed, as an operator declares it: budgets declared, read and closed; pods
registered, stopped by hand and resumed; the configured providers checked; every provider
account swept for pods that bill under no budget.

May use: `governor.domain`, `governor.db`, `stopping`, `runs`, `plans`, `money`,
`monitoring`, `replica`, `security`, and the shared modules.
"""
