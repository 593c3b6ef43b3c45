"""Trust: the server's Ed25519 keys and signatures, nonces made ahead of time, each event signed once per
audience form, and the tokens sockets join with. Imports ``relay.core`` and ``relay.settings``."""
