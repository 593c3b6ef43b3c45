"""Operations: the ``tablerelay`` command line and what it runs (serving, rooms, campaigns, backup and
restore, exports and imports, keys, store copies). The top layer: it may import every other."""
