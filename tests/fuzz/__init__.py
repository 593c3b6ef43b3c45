"""Coverage-guided fuzz targets (atheris): frame decoding through the room, and both dice dialects.

``targets.py`` holds the targets as plain functions (no atheris needed to replay an input);
``python -m tests.fuzz TARGET [libFuzzer flags] [corpus dirs]`` runs one under atheris.
"""
