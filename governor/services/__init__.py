"""Use cases: each takes the context and a session, decides through the domain, persists."""
