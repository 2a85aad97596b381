"""Who may call, and how often: bearer tokens (made, hashed, cached, revoked), the dashboard's
sign-in, the limiters of failed authentications and of writes, and the secrets replicas share.

May use: `governor.domain`, `governor.db`, and the shared modules of `governor.services`
(`ids`, `events`). Nothing else of the services.
"""
