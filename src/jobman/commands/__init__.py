"""What each jobman command does, one function per command, called by the CLI (jobman.cli) and the dashboard
(jobman.ui): they parse and print; these read and change the store.

api: the State a command opens, and run, list, wait, cancel, reconcile, logs. showing: `show`. listing: `list`.
admin: groups and prune. control: signal, hold, release, priority. restart. logs: reading a job's output.
reconcile: the conservative pass that explains abandoned records (the lease round's holder runs it too).
targets: finding a job's processes. render: a job as text.
"""
