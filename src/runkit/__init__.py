"""Shared by jobman and stado, in three layers and the dashboards' server:

    core/    pure: ids, durations, the clock object, outcomes, retry policy, records, JSON, text shown on a
             terminal, secrets kept out of what is shown, SHA-256 (no I/O beyond reading the clocks)
    system/  the operating system: process control and identity (proc), file locks, durable writes, finding
             processes by their environment, capped log files, fault points for the tests
    cli/     what both command lines share: argparse with one-line errors, the fast option table, the ending
    web/     the dashboards' HTTP server (loaded by the `ui` commands alone)

Nothing here imports jobman or stado; core imports nothing of runkit's outside core. Keep module imports cheap,
since the submitting CLI and every supervisor load parts of this package.
"""
