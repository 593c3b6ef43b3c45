"""Measurements outside the suite, run by hand to decide a change: variants or layouts taking turns."""
