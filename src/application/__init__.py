"""Use cases and the ports they run over. Imports the domain and the stdlib only."""
