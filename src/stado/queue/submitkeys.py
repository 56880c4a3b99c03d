"""A submission's own key (`stado submit --key KEY`): submit-keys/<key>.json, written create-if-absent before the job,
names the job the key submitted with that job's first record and a hash of the request, so that running the same
command again returns that job (stado.queue.submission writes it and reads it).
"""
import os

from ..core import documents as d
from ..core import keys
from ..core.errors import BadInput
from ..core.spec import InputRef
from ..objectstore.base import ObjectStore
from ..store.cas import new_nonce
from ..store.landing import TAKEN, Patience, create

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .submission import Submission

MAX_KEY = 200
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:@+=-")


def check_key(key) -> str:
    """An idempotency key as `--key` takes it; BadInput, in one line, otherwise. It becomes part of a store key, so
    it is kept to characters every backend holds as they are."""
    if (not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY or not set(key) <= _KEY_CHARS
            or not key[0].isalnum()):
        shown = repr(key[:60] + "..." if isinstance(key, str) and len(key) > 60 else key)
        raise BadInput(f"bad --key {shown}: use 1-{MAX_KEY} letters, digits and . _ : @ + = -, starting with a letter "
                       "or digit")
    return key


def request_hash(item: "Submission", rerun_of: str | None = None, rerun_inputs: str | None = None) -> str:
    """What a key stands for: the request as it was given (the command and every flag, inputs by the selectors
    typed, uploads by their paths), not as it was resolved: the same command run again is the same request even
    once a named producer has a newer run."""
    from runkit.core import jsonfast
    from runkit.core.hashing import sha256

    inputs = [entry.to_json() if isinstance(entry, InputRef) else list(entry) for entry in item.inputs]
    request = {"spec": item.spec.to_json(), "inputs": inputs, "uploads": [os.path.abspath(p) for p in item.uploads],
               "rerun_of": rerun_of, "rerun_inputs": rerun_inputs}
    if item.after:  # (absent without dependencies: a key's request is the one it was before they existed)
        request["after"] = [list(pair) for pair in item.after]
    return sha256(jsonfast.dumps(request, sort_keys=True).encode()).hex()


def keyed_job(store: ObjectStore, key: str, request: str) -> d.Job | None:
    """The first record of the job `key` submitted, None if the key is new; BadInput if it was given with another
    request."""
    from ..store.cas import read_json

    found = read_json(store, keys.submit_key(key))
    return None if found is None else _key_job(key, found[0], request)


def _key_job(key: str, record_: dict, request: str) -> d.Job:
    from ..core.errors import CorruptDocument

    where = keys.submit_key(key)
    try:
        first = d.decode(where, d.encode(record_["doc"]))
        job_id, theirs = str(record_["job"]), record_["request"]
    except (KeyError, TypeError) as e:
        raise CorruptDocument(where, f"missing or bad field {e}") from None
    if theirs != request:
        raise BadInput(f"--key {key} already submitted job {job_id}, with another command or other flags; nothing was "
                       f"submitted (a key names one request: give another key, or see `stado status {job_id}`)")
    return first


def claim_key(store: ObjectStore, key: str, request: str, first: d.Job, patience: Patience):
    """Write the key's record (create-if-absent) naming this job: (LANDED, None); (the first record of the job
    another run submitted with the same key and request, None) when it took the key first; otherwise (NOT_LANDED
    or UNKNOWN, the store's error)."""
    nonce = new_nonce()
    record_ = {"key": key, "job": first.id, "request": request, "doc": first.raw, "nonce": nonce,
               "generation": 1, "written_at": first.written_at, "written_by": first.written_by}
    where = keys.submit_key(key)

    def mine():
        from ..store.cas import read_json

        found = read_json(store, where)
        if found is None:
            return False
        return True if found[0].get("nonce") == nonce else found[0]

    outcome, said = create(store, where, d.encode(record_), mine, patience, exists_is_ours=False)
    if outcome == TAKEN:
        return _key_job(key, said, request), None
    return outcome, said
