"""PULL_MESSAGE as the consumer sends it: the header filled into a template is byte for byte the
header the general encoder writes from the same fields, for any group, topic and expression."""
from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from mqtool.client.base import MessageQueue
from mqtool.client.consumer import pull_request
from mqtool_remoting.codes import RequestCode
from mqtool_remoting.extfields import from_ext_fields
from mqtool_remoting.headers import PullMessageRequestHeader

NAMES = st.text(min_size=1, max_size=10)


@given(NAMES, NAMES, st.integers(0, 1 << 20), st.integers(0, 2**62), st.integers(1, 64), st.text(max_size=30),
       st.sampled_from([0, 15000]), st.one_of(st.none(), st.integers(0, 2**40)), st.sampled_from(["TAG", "SQL92"]),
       st.integers(0, 2**45))
def test_the_pull_header_template_writes_what_the_general_encoder_writes(group, topic, queue_id, offset, nums, expr,
                                                                         suspend, commit, kind, version):
    cmd = pull_request(group, MessageQueue(topic, "b", queue_id), offset, nums, expr, suspend, commit, kind, version)
    assert cmd.encode() == dataclasses.replace(cmd, header_json=None).encode()
    h = from_ext_fields(PullMessageRequestHeader, cmd.ext_fields)
    assert (cmd.code, h.consumerGroup, h.topic, h.queueId, h.queueOffset, h.maxMsgNums, h.subscription) == \
        (RequestCode.PULL_MESSAGE, group, topic, queue_id, offset, nums, expr)
    assert h.sysFlag == 0x4 | (0x2 if suspend else 0) | (0x1 if commit is not None else 0)
    assert (h.commitOffset, h.subVersion, h.expressionType) == (commit or 0, version, kind)


def test_the_usual_pull_uses_the_template_and_a_clash_with_its_marks_does_not():
    mq = MessageQueue("T", "b", 0)
    assert pull_request("CG", mq, 5, 32, "*", 0, None, "TAG", 1).header_json is not None
    assert pull_request("\x00offset\x00", mq, 5, 32, "*", 0, None, "TAG", 1).header_json is None
