"""The `mqtool` command: one typer app, sub-apps grouped by area.

An area's module is imported only when one of its commands runs: `mqtool --help` is drawn from
the table below alone, and `mqtool store ...` loads the store commands and nothing else; a shell
completion's TAB loads the area being completed, or the table alone for the first word. A test
holds the table's help texts to the modules' own; tests/cli/test_startup.py what each path loads.
"""
from __future__ import annotations

import importlib
import os
import sys

import typer

from mqtool import __version__
from mqtool.cli.errors import fail, quiet_broken_pipe, usage_line

HELP = "Apache RocketMQ 4.x in Python: store toolkit, name server, broker and clients."
# name -> (module, attribute, help panel, help text); loading any of them also loads `ops`, which hangs
# the admin commands on the broker, name server and admin groups.
GROUPS = {
    "store": ("store", "app", "Store (offline, read-only)", "Read a store directory offline: dump, stats, verify, query."),
    "namesrv": ("namesrv", "app", "Servers", "Run a RocketMQ name server."),
    "broker": ("broker", "app", "Servers", "Run a RocketMQ broker."),
    "ha": ("ha", "app", "Servers", "Master/slave replication (HA)."),
    "controller": ("controller", "app", "Servers",
                   "Run a controller (RocketMQ 5 controller mode) and ask it: leader, syncStateSets, elections."),
    "spark": ("spark", "app", "Spark jobs", "Spark jobs: export stores and live clusters to Parquet, replay, rebuild consume queues and index."),
    "topic": ("admin", "topic_app", "Administration", "Create, delete, list and inspect topics."),
    "cluster": ("admin", "cluster_app", "Administration", "Clusters and their brokers."),
    "group": ("admin", "group_app", "Administration", "Consumer groups: progress and lag."),
    "message": ("admin", "message_app", "Administration", "Find messages by key or id; a message's trace."),
    "producer": ("admin", "producer_app", "Administration", "Producer groups."),
    "acl": ("acl", "app", "Administration", "Plain ACL: accounts, whitelists, versions on brokers; sign a request."),
    "timer": ("timer", "app", "Administration", "RocketMQ 5 timer messages: waiting, next due, behind, per master."),
}
COMMANDS = {
    "send": ("send", "send", "Messages",
             "Send messages; one result line per message (status, msgId, broker, queue, queue offset)."),
    "consume": ("consume", "consume", "Messages",
                "Consume messages: a real group (-g), or explicit queues from a start position."),
    "top": ("top", "top", "Administration",
            "A live view of a cluster: brokers, the busiest topics, consumer groups with lag and its trend."),
}
# mqadmin's names, hidden, for muscle memory: name -> (module, attribute).
ALIASES = {
    "updateTopic": ("admin", "topic_create"), "deleteTopic": ("admin", "topic_delete"),
    "topicList": ("admin", "topic_list"), "topicRoute": ("admin", "topic_route"),
    "topicStatus": ("admin", "topic_status"), "clusterList": ("admin", "cluster_list"),
    "brokerStatus": ("admin", "broker_status"), "consumerProgress": ("admin", "group_progress"),
    "queryMsgByKey": ("admin", "message_query"), "queryMsgById": ("admin", "message_query"),
    "queryMsgByUniqueKey": ("admin", "message_query"), "consumerConnection": ("admin", "group_connections"),
    "updateSubGroup": ("admin", "group_create"), "setConsumeMode": ("admin", "group_set_consume_mode"),
    "resetOffsetByTime": ("admin", "group_reset_offset"),
    "queryMsgByOffset": ("admin", "message_print"), "printMsg": ("admin", "message_print"),
    "printMsgByQueue": ("admin", "message_print"), "deleteSubGroup": ("admin", "group_delete"),
    "updateTopicPerm": ("admin", "topic_perm"), "getBrokerConfig": ("admin", "broker_config_get"),
    "updateBrokerConfig": ("admin", "broker_config_set"), "producerConnection": ("admin", "producer_connections"),
    "getNamesrvConfig": ("admin", "namesrv_config"), "sendMessage": ("send", "send_message"),
    "consumeMessage": ("consume", "consume"), "haStatus": ("ha", "status"),
    "updateNamesrvConfig": ("ops", "namesrv_update_config"), "brokerConsumeStats": ("ops", "broker_consume_stats"),
    "consumerStatus": ("ops", "group_status"), "cloneGroupOffset": ("ops", "group_clone_offset"),
    "queryCq": ("ops", "message_cq"), "topicClusterList": ("ops", "topic_clusters"), "statsAll": ("ops", "stats_all"),
    "producer": ("ops", "producer_list"), "cleanExpiredCQ": ("ops", "clean_expired_cq"),
    "cleanUnusedTopic": ("ops", "clean_unused_topic"), "deleteExpiredCommitLog": ("ops", "delete_expired_commitlog"),
    "updateAclConfig": ("acl", "acl_update"), "deleteAccessConfig": ("acl", "acl_delete"),
    "deleteAclConfig": ("acl", "acl_delete"), "clusterAclConfigVersion": ("acl", "acl_list"),
    "updateGlobalWhiteAddr": ("acl", "acl_whitelist"), "queryMsgTraceById": ("trace", "message_trace"),
    "getControllerMetaData": ("controller", "status"), "getSyncStateSet": ("controller", "sync_state"),
    "electMaster": ("ha", "elect"), "getControllerConfig": ("controller", "config_get"),
    "updateControllerConfig": ("controller", "config_set"), "cleanBrokerMetadata": ("controller", "clean"),
}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mqtool {__version__}")
        raise typer.Exit()


def _root(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                       help="Show the version and exit.")) -> None:
    """Apache RocketMQ 4.x in Python: store toolkit, name server, broker and clients."""


# The modules whose groups `ops` hangs more commands on when it is imported.
_WIRED_BY_OPS = ("admin", "broker", "namesrv")
# typer.rich_utils imports these at its top for Markdown help texts and pretty tracebacks (with
# markdown_it and pygments: ~65 ms of every command's start-up), neither of which mqtool uses.
_UNUSED_RICH = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}


def _stand_in(module: str, name: str) -> type:
    """A class that is `module.name` once used: calling it or reading an attribute (a classmethod)
    imports the real one."""
    def real():
        return getattr(importlib.import_module(module), name)

    class Later(type):
        def __getattr__(cls, attribute):
            return getattr(real(), attribute)

        def __instancecheck__(cls, obj):
            return isinstance(obj, real())

    return Later(name, (), {"__new__": lambda cls, *args, **kwargs: real()(*args, **kwargs)})


def rich_utils():
    """typer.rich_utils, imported without rich's Markdown and Traceback modules (see _UNUSED_RICH)."""
    if "typer.rich_utils" not in sys.modules:
        import types
        stubs = {}
        for module, name in _UNUSED_RICH.items():
            if module not in sys.modules:
                stubs[module] = sys.modules[module] = types.ModuleType(module)
                setattr(stubs[module], name, _stand_in(module, name))
        try:
            importlib.import_module("typer.rich_utils")
        finally:
            for module, stub in stubs.items():      # a later import of them loads the real modules
                if sys.modules.get(module) is stub:
                    del sys.modules[module]
    return sys.modules["typer.rich_utils"]


def _load(module: str, attribute: str):
    obj = importlib.import_module(f"mqtool.cli.{module}")
    if module in _WIRED_BY_OPS:
        importlib.import_module("mqtool.cli.ops")          # the admin commands' wiring
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj


def build(only: str | None = None, light: bool = False) -> typer.Typer:
    """The app with every command (`only=None`), with one area or command, or (`light`) the top
    level alone with its help texts, for `mqtool --help`."""
    app = typer.Typer(name="mqtool", help=HELP, no_args_is_help=True, pretty_exceptions_enable=False,
                      context_settings={"help_option_names": ["-h", "--help"]})
    app.callback()(_root)
    for name, (module, attribute, panel, text) in GROUPS.items():
        if only in (None, name):
            sub = typer.Typer(help=text, no_args_is_help=True) if light else _load(module, attribute)
            if light:
                sub.command("-")(lambda: None)                  # a placeholder: never run, never shown
            app.add_typer(sub, name=name, rich_help_panel=panel, help=text)
    for name, (module, attribute, panel, text) in COMMANDS.items():
        if only in (None, name):
            app.command(name, rich_help_panel=panel, help=text)((lambda: None) if light else _load(module, attribute))
    if not light:
        for name, (module, attribute) in ALIASES.items():
            if only in (None, name):
                app.command(name, hidden=True)(_load(module, attribute))
    return app


def _chosen(args: list[str]) -> str | None:
    first = next((a for a in args if not a.startswith("-")), None)
    return first if first in GROUPS or first in COMMANDS or first in ALIASES else None


def _completed_words() -> list[str]:
    """The words before the one a shell completion is completing, program name left out, read as
    typer's completion classes read them: bash's COMP_WORDS/COMP_CWORD; zsh's and fish's
    _TYPER_COMPLETE_ARGS, whose last word is being completed unless the line ends in a space."""
    import shlex

    def split(line: str) -> list[str]:
        try:
            return shlex.split(line)
        except ValueError:                  # an open quote
            return line.split()
    if "COMP_WORDS" in os.environ:
        try:
            cword = int(os.environ.get("COMP_CWORD", ""))
        except ValueError:
            return []
        return split(os.environ["COMP_WORDS"])[1:cword]
    line = os.environ.get("_TYPER_COMPLETE_ARGS", "")
    words = split(line)[1:]
    if "_TYPER_COMPLETE_WORD_TO_COMPLETE" in os.environ:        # PowerShell names the word apart
        return words[:-1] if os.environ["_TYPER_COMPLETE_WORD_TO_COMPLETE"] else words
    return words if line.endswith(" ") else words[:-1]


def main() -> None:
    try:
        # typer draws a usage error as a panel there: one line instead
        rich_utils().rich_format_error = usage_line
    except (ImportError, AttributeError):    # (without rich typer prints click's plain lines)
        pass
    try:
        if os.environ.get("_MQTOOL_COMPLETE"):
            # a TAB: the area being completed, or the top level (the table) for the first word;
            # generating the scripts (source_bash...) needs no command either
            chosen = _chosen(_completed_words())
            app = build(chosen) if chosen else build(light=True)
        else:
            chosen = _chosen(sys.argv[1:])
            app = build(chosen) if chosen else build(light=True)
        app(prog_name="mqtool")
    except BrokenPipeError:
        quiet_broken_pipe()
        sys.exit(0)
    except SystemExit as exc:
        # typer's click and rich catch a broken pipe themselves and exit 1; output piped into
        # `head` is not a failure: exit 0, as for a pipe closed outside them (above)
        if exc.code == 1 and isinstance(exc.__context__, BrokenPipeError):
            quiet_broken_pipe()
            sys.exit(0)
        raise
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # the one boundary where errors become a line and a code
        sys.exit(fail(exc))
