"""Rendering for people: the run report (HTML, Markdown) and the dashboard's formatting, from
the services' read models.

May use: `governor.domain` and the read models of `governor.services`; used by `governor.api`
and `governor.web`.
"""
