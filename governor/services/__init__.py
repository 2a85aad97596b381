"""Use cases: each takes the context and a session, decides through the domain, persists.

Grouped by capability, each room a sub-package with its own docstring saying what it owns and
what it may use; a room writes the read models of what it owns (its `*_model.py` modules),
the frozen dataclasses the API answers with and derives its JSON from. The rooms, from those
that use the most to those that use the least (a room may import the rooms below it, never
one above; rooms on one line are independent):

    view                      what people read: the dashboard, the report, /metrics
    jobs | fleet              what a job says (heartbeats) | what an operator declares
    stopping                  the enforcement pass and the stop orders
    runs                      a run's start and its end with its pod
    plans                     the plan document, preflight admission
    money                     the book, the meter, the bill, extensions
    monitoring                GPU telemetry and run metrics as time series
    context                   what every use case receives
    replica                   this replica: its lease, its writes, its passes' health
    security                  tokens, sign-in, limiters, what a client may send
    ids, events, notifications  shared by every room (the event log, written and read)

The import-linter contracts in pyproject.toml check this order.
"""
