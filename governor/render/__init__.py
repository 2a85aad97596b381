"""Rendering for people: the run report (HTML, Markdown), the dashboard's charts, and one way
of writing figures for all of them (`format`), from the services' read models.

May use: `governor.domain` and the read models of `governor.services`; used by `governor.api`
and `governor.web`.
"""
