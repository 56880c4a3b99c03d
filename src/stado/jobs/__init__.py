"""A job's transitions in the object store, one function each, with the precondition in a conditional write.

One rule fences every move: running/<id>.json is the job's move lock.

- The claim creates it (create-if-absent: one winner); while it exists nobody else can claim the job.
- A move out of running/ (to a terminal record, or back to the queue) first takes the record: a
  put-if-match on the version this writer read (or just wrote itself). Then it writes the new record
  (create-if-absent, or put-if-match on the leftover it replaces), then deletes running/ with
  delete-if-match on the version it took. A writer whose take fails was overtaken and writes nothing; a
  writer overtaken after its take finds its delete refused, while whoever took the record from it
  finishes the same move (the decision is written in the record). A requeue written late by an
  overtaken writer is older than the entry it would shadow: claims tell it by its generation.
- Every delete is conditional on the version read: a stale writer never removes a newer record.
- Terminal records are final. A queue entry beside one is a leftover to clean up; a claim that finds
  one starts nothing; a reaper's verdict or a cancel tombstone meeting one writes no second one.

claiming.py: queued -> running (the claim, its check, giving it back, re-adoption, take-over);
moves.py: renewals, the pulse, and every move out of running/ (finish, settle, the leftovers pass);
cancellation.py: cancellation; hold.py: holding a queued job; reaper.py: the reaper (its verdict on a worker, its watch,
its pass), imported on its own. docs/stado.md has the table of every transition's writes and crash windows.
"""
from .cancellation import CancelReport, cancel
from .claiming import (Readopted, Unverified, claim, give_back, lost_worker_requeue, readopt, stale_claim, take_over, verify_claim)
from .common import CONFLICT_RETRIES, Overtaken
from .moves import finish, own_write, pulse, renew, settle, settle_leftovers, settle_own_cancel

__all__ = ["CONFLICT_RETRIES", "CancelReport", "Overtaken", "Readopted", "Unverified", "cancel", "claim", "finish",
           "give_back", "lost_worker_requeue", "own_write", "pulse", "readopt", "renew", "settle", "settle_leftovers", "settle_own_cancel", "stale_claim", "take_over",
           "verify_claim"]
