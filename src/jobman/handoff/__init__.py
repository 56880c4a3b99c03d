"""A job handed from the command that submits it to the supervisor that owns it, and how commands reach that
supervisor afterwards.

spec: the job spec, built from a command's options (its program found on PATH, its log's block size read).
pipelines: a pipeline file's jobs (`jobman run --from FILE.toml`) as specs.
submit: the command's half (commit the job, start its supervisor, read the acknowledgement, check a lost one
against the database). launch: starting a detached supervisor and reading its acknowledgement. ack: the
acknowledgement's bytes. doorbell: the FIFO a command rings a supervisor on.
"""
