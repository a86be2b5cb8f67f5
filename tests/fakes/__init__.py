"""In-memory fakes of the ports, for unit and contract tests."""
