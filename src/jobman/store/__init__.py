"""jobman's store: every SQL statement of jobman lives in this package.

database: the connection, creating and migrating the schema (migrations), short write transactions.
queries: reads (what commands show, what a supervisor polls).
transitions: every change of a job's state, one function each, precondition in the SQL predicate.
lease_round: the lease round's reads and writes (its holder, the waiting jobs it keeps leased, their cover).
pruning: removing finished jobs.
selectors: what a JOB argument (a handle, `last`, an id, a name, an id prefix) names.
trouble: storage trouble (locked, read-only, full, gone) waited out by a supervisor, translated once for a command.
dashboard: the dashboard's reads.
sqlite: SQLite's C module, loaded without the sqlite3 package.
"""
