"""tablerelay's server, in layers that import only downward (docs/architecture.md):
``ops`` > ``shell`` > ``storage`` > ``trust`` > ``core`` > ``settings``, with the rules core (``rules``) below
them all. ``relay.signing`` is the public way to check signed events from Python."""
