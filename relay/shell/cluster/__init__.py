"""Several relay nodes on one NATS store (spec/cluster.md): appends that lost a race tried again, and who is
in a room across nodes."""
