"""Settings and logs, under every layer: the server's configuration (defaults, file, environment, flags) and
the structlog set-up."""
