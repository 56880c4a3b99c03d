"""jobman: reliable background jobs on one machine, with no daemon: SQLite holds the state and each job gets a
detached supervisor of its own.

Its layers, each a folder, each importing only those before it: core (errors, records, the slot verdict, a
home's paths), store (every SQL statement), handoff (a job handed from the submitting command to its supervisor:
its spec built from the options, and the doorbell commands ring it on), supervisor (one job's owner),
commands (what each command does), and the two front ends, cli and ui. docs/architecture.md draws the tree.
"""
