"""Identity providers: OpenID Connect, through authlib (the `oidc` extra)."""
