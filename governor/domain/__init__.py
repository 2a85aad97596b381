"""The functional core: pure values and decisions, standard library only."""
