"""Cloud providers that stop pods while keeping their workspace."""
