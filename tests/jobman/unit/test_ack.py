"""The supervisor's acknowledgement: exactly one version, the job's own id, a UUIDv7 supervisor id, no
other field, at most ACK_MAX_BYTES. Each way of being wrong is refused, and says which it is. The two
faulty acknowledgements the handoff tests make a supervisor send (faults supervisor:bad_ack and
supervisor:big_ack) are refused here, so those tests exercise the reconciliation they claim to."""
import pytest

from jobman.handoff import ack

JOB = "01900000-0000-7000-8000-000000000001"
SUPERVISOR = "01900000-0000-7000-8000-0000000000ff"


def test_the_supervisors_acknowledgement_decodes():
    assert ack.decode(ack.encode(JOB, SUPERVISOR), JOB) == SUPERVISOR


@pytest.mark.parametrize("raw, reason", [
    (b"", "closed its acknowledgement pipe without answering"),
    (b"{" + b" " * 200_000 + b"}", f"larger than {ack.ACK_MAX_BYTES} bytes"),  # what supervisor:big_ack sends
    (ack.encode(JOB, SUPERVISOR).replace(b"}", b',"extra":true}'), "unknown fields: extra"),  # supervisor:bad_ack
    (b'{"v":2,"job_id":"%s","supervisor_id":"%s"}' % (JOB.encode(), SUPERVISOR.encode()), "version 2, expected 1"),
    (b'{"job_id":"%s","supervisor_id":"%s"}' % (JOB.encode(), SUPERVISOR.encode()), "version None"),
    (ack.encode("01900000-0000-7000-8000-000000000002", SUPERVISOR), "names job '01900000-0000-7000-8000-00000000"
                                                                     "0002', not " + JOB),
    (b'{"v":1,"job_id":"%s","supervisor_id":"not-a-uuid"}' % JOB.encode(), "'not-a-uuid' is not a UUIDv7"),
    (b'{"v":1,"job_id":"%s","supervisor_id":"01900000-0000-4000-8000-0000000000ff"}' % JOB.encode(),
     "is not a UUIDv7"),
    (b'{"v":1,"job_id":"%s","supervisor_id":7}' % JOB.encode(), "7 is not a UUIDv7"),
    (b"not json", "not valid JSON"),
    (b"\xff\xfe", "not valid JSON"),
    (b"[1, 2]", "not a JSON object"),
])
def test_a_wrong_acknowledgement_is_refused_for_its_own_reason(raw, reason):
    with pytest.raises(ack.BadAck) as refused:
        ack.decode(raw, JOB)
    assert reason in str(refused.value)


def test_exactly_the_size_limit_is_still_read():
    padded = ack.encode(JOB, SUPERVISOR).rstrip(b"\n")
    padded = padded[:-1] + b" " * (ack.ACK_MAX_BYTES - len(padded)) + b"}"
    assert len(padded) == ack.ACK_MAX_BYTES and ack.decode(padded, JOB) == SUPERVISOR
    with pytest.raises(ack.BadAck, match="larger than"):
        ack.decode(padded + b" ", JOB)
