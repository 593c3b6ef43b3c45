"""End-to-end tests: a real tablerelay server process spoken to by real WebSocket clients."""
