"""stado's pure core: what every other layer builds on, with no I/O.

documents: the job's records, the writes a move makes, and what readers show. keys: every key's shape. spec: the
job spec that travels with every job. admission: whether an agent may run a job. problems: what a pass met and
could not decide on, as values. errors: the one exception root. brief: bounded text. faults: the test fault points.
"""
