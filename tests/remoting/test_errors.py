"""RemotingCommandError: a broker's or name server's refusal as the one line the CLI prints."""
from __future__ import annotations

from mqtool_remoting.codes import ResponseCode
from mqtool_remoting.errors import RemotingCommandError


def test_javas_faq_hint_is_not_a_second_line():
    # the name server's remark, as NameServer 4.9.8's DefaultRequestProcessor words it
    remark = ("No topic route info in name server for the topic: Nope\n"
              "See http://rocketmq.apache.org/docs/faq/ for further details.")
    exc = RemotingCommandError(ResponseCode.TOPIC_NOT_EXIST, remark, "route of topic Nope")
    assert str(exc) == ("route of topic Nope: TOPIC_NOT_EXIST (17): "
                        "No topic route info in name server for the topic: Nope")
    assert exc.remark == remark                     # the remark itself is kept as the server sent it


def test_other_line_breaks_become_spaces():
    exc = RemotingCommandError(ResponseCode.SYSTEM_ERROR, "first\n  second\r\n\nthird\n")
    assert str(exc) == "SYSTEM_ERROR (1): first second third"


def test_an_empty_remark_adds_nothing():
    assert str(RemotingCommandError(ResponseCode.SYSTEM_ERROR, None, "send")) == "send: SYSTEM_ERROR (1)"
    assert str(RemotingCommandError(ResponseCode.SYSTEM_ERROR, "\n")) == "SYSTEM_ERROR (1)"
