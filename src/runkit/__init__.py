"""Shared by jobman and stado: a pure core (ids, durations, retry policy) and process control.

Nothing here imports jobman or stado; keep module imports cheap, since the submitting CLI and
every supervisor load parts of this package.
"""
