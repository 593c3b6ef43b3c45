"""The HTTP side of the server: its routes, the served client files and the Foundry module's package."""
