"""Storage: SQLAlchemy tables, the engine, the unit of work and the repository."""
