"""Authentication (who is calling), authorization (may they) and the write guards."""
