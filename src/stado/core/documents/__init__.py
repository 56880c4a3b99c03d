"""Job documents and the decisions about them (pure: no I/O, time and nonces are arguments).

Every document carries `generation` (bumped by each write of the job, so no two writes are
byte-identical and a stale writer is fenced) and the writer's `nonce` (so a writer whose retried
request may have landed can read back and recognise its own write). The spec travels in every
document, so any one record answers every question about the job.

States are the key prefixes (queued, running, completed, failed, cancelled). A running document
also has a `phase`: `running`, `finishing` (the outcome is decided and fenced; the terminal record
is being written) or `cancelling` (an operator cancelled it; the owner stops the process group).
`outcome` is separate from `state`, and `terminal` is decided here, from TERMINAL_STATES.

`decode` turns the stored JSON into a Job: a slotted record whose properties name every field the code reads
(the stored JSON is kept whole in `raw`, so a document is written back byte for byte as it was read, fields
of other writers included). No module but this one reads a job document by a string key, and the state and
phase names are spelled here alone (QUEUED ..., RUNNING_PHASE, FINISHING, CANCELLING). A Job also reads as a
mapping of its stored fields (`job["phase"]`, `job.get(...)`): for tests and for views that show the stored
form as it is; the library's own decisions use the properties.
"""
from .records import (SCHEMA, QUEUED, RUNNING, COMPLETED, FAILED, CANCELLED, STATES, RUNNING_PHASE, FINISHING, CANCELLING, PHASES, OUTCOMES, ERROR_CLASSES, MAX_ERROR_MESSAGE, iso, parse_iso, Document, Spec, Job, encode, decode, raw_of, next_doc)
from .changes import (RERUN_INPUTS, queued_doc, same_submission, held_doc, released_doc, claim_doc, renewed_doc, taken_doc, reaped_cancel_doc, attempt_of, is_leftover_queue_entry, result, classify_exit, terminal_state_of, retry_earned, retry_waits, finishing_doc, cancelling_doc, cancel_tombstone, terminal_doc, reaped_doc, requeued_after_loss, returned_doc, requeued_after_failure, repaired_doc)
from .views import JobView, process_may_run, decided, goes_back_to_queue, resolve, status_json

__all__ = ["CANCELLED", "CANCELLING", "COMPLETED", "ERROR_CLASSES", "FAILED", "FINISHING", "Job", "JobView",
           "MAX_ERROR_MESSAGE", "OUTCOMES", "PHASES", "QUEUED", "RERUN_INPUTS", "RUNNING", "RUNNING_PHASE",
           "Document", "SCHEMA", "STATES", "Spec", "attempt_of", "cancel_tombstone", "cancelling_doc", "claim_doc",
           "classify_exit", "decided", "decode", "encode", "finishing_doc", "goes_back_to_queue", "held_doc",
           "is_leftover_queue_entry", "iso", "next_doc", "parse_iso", "process_may_run", "queued_doc", "raw_of",
           "reaped_cancel_doc", "reaped_doc", "released_doc", "renewed_doc", "repaired_doc",
           "requeued_after_failure", "requeued_after_loss", "resolve", "result", "retry_earned", "retry_waits", "returned_doc",
           "same_submission", "status_json", "taken_doc", "terminal_doc", "terminal_state_of"]
