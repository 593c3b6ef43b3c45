"""Storage: the event log interface (``base``) and its backends, SQLite (the embedded default) and NATS
JetStream (the cluster); which one a command uses (``stores``); room export files. Imports ``relay.trust``,
``relay.core`` and ``relay.settings``."""
