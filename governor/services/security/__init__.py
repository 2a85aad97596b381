"""Who may call, and how often: bearer tokens (made, hashed, cached, revoked), the dashboard's
sign-in and its page sessions, the limiters of failed authentications and of writes, the
secrets replicas share, and what a client may send (`safe_input`: the text, numbers and times
the API's requests and the plan document accept).

May use: `governor.domain`, `governor.db`, and the shared modules of `governor.services`
(`ids`, `events`). Nothing else of the services.
"""
