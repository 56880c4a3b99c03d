"""The supervisor's one acknowledgement on its stdout: versioned, size-limited, strict."""
from runkit.core.ids import is_uuid, is_uuid7

ACK_VERSION = 1
ACK_MAX_BYTES = 1024
_FIELDS = {"v", "job_id", "supervisor_id"}


class BadAck(Exception):
    """The acknowledgement is missing, oversized, malformed, of another version, or names other ids."""


def encode(job_id: str, supervisor_id: str) -> bytes:
    # Both ids are canonical UUID strings: nothing in them needs escaping, and the supervisor
    # is spared importing json before it answers.
    assert is_uuid(job_id) and is_uuid(supervisor_id)
    return f'{{"v":{ACK_VERSION},"job_id":"{job_id}","supervisor_id":"{supervisor_id}"}}\n'.encode()


def decode(raw: bytes, expected_job_id: str) -> str:
    """Validate an acknowledgement; return the supervisor id. Raises BadAck."""
    if not raw:
        raise BadAck("the supervisor closed its acknowledgement pipe without answering")
    if len(raw) > ACK_MAX_BYTES:
        raise BadAck(f"the acknowledgement is larger than {ACK_MAX_BYTES} bytes")
    from runkit.core.jsonfast import loads

    try:
        ack = loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise BadAck("the acknowledgement is not valid JSON") from None
    if not isinstance(ack, dict):
        raise BadAck("the acknowledgement is not a JSON object")
    unknown = set(ack) - _FIELDS
    if unknown:
        raise BadAck(f"the acknowledgement has unknown fields: {', '.join(sorted(map(str, unknown)))}")
    if ack.get("v") != ACK_VERSION:
        raise BadAck(f"the acknowledgement has version {ack.get('v')!r}, expected {ACK_VERSION}")
    if ack.get("job_id") != expected_job_id:
        raise BadAck(f"the acknowledgement names job {ack.get('job_id')!r}, not {expected_job_id}")
    supervisor_id = ack.get("supervisor_id")
    if not isinstance(supervisor_id, str) or not is_uuid(supervisor_id) or not is_uuid7(supervisor_id):
        raise BadAck(f"the acknowledgement's supervisor id {supervisor_id!r} is not a UUIDv7")
    return supervisor_id
