"""The `mqtool` command: one typer app, sub-apps grouped by area."""
from __future__ import annotations

import sys

import typer

from mqtool import __version__
from mqtool.cli import admin as admin_cmds
from mqtool.cli import broker as broker_cmds
from mqtool.cli import ha as ha_cmds
from mqtool.cli import ops
from mqtool.cli.consume import consume
from mqtool.cli.send import send
from mqtool.cli import namesrv as namesrv_cmds
from mqtool.cli import spark as spark_cmds
from mqtool.cli import store as store_cmds
from mqtool.cli.errors import fail, quiet_broken_pipe

app = typer.Typer(
    name="mqtool",
    help="Apache RocketMQ 4.x in Python: store toolkit, name server, broker and clients.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mqtool {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                       help="Show the version and exit.")) -> None:
    """Apache RocketMQ 4.x in Python: store toolkit, name server, broker and clients."""


app.add_typer(store_cmds.app, name="store", rich_help_panel="Store (offline, read-only)")
app.add_typer(namesrv_cmds.app, name="namesrv", rich_help_panel="Servers")
app.add_typer(broker_cmds.app, name="broker", rich_help_panel="Servers")
app.add_typer(ha_cmds.app, name="ha", rich_help_panel="Servers")
app.add_typer(spark_cmds.app, name="spark", rich_help_panel="Spark jobs")
app.command(rich_help_panel="Messages")(send)
app.command(rich_help_panel="Messages")(consume)
app.add_typer(admin_cmds.topic_app, name="topic", rich_help_panel="Administration")
app.add_typer(admin_cmds.cluster_app, name="cluster", rich_help_panel="Administration")
app.add_typer(admin_cmds.group_app, name="group", rich_help_panel="Administration")
app.add_typer(admin_cmds.message_app, name="message", rich_help_panel="Administration")
broker_cmds.app.add_typer(admin_cmds.broker_admin_app, name="admin", hidden=True)
broker_cmds.app.command("status")(admin_cmds.broker_status)
broker_cmds.app.add_typer(admin_cmds.broker_config_app, name="config")
namesrv_cmds.app.add_typer(admin_cmds.namesrv_admin_app, name="admin", hidden=True)
namesrv_cmds.app.command("config")(admin_cmds.namesrv_config)
namesrv_cmds.app.command("kv")(admin_cmds.namesrv_kv)
app.add_typer(admin_cmds.producer_app, name="producer", rich_help_panel="Administration")
broker_cmds.app.command("consume-stats")(ops.broker_consume_stats)
broker_cmds.app.command("clean-expired-cq")(ops.clean_expired_cq)
broker_cmds.app.command("clean-unused-topic")(ops.clean_unused_topic)
broker_cmds.app.command("delete-expired-commitlog")(ops.delete_expired_commitlog)
admin_cmds.group_app.command("status")(ops.group_status)
admin_cmds.group_app.command("clone-offset")(ops.group_clone_offset)
admin_cmds.message_app.command("cq")(ops.message_cq)
admin_cmds.topic_app.command("clusters")(ops.topic_clusters)
admin_cmds.cluster_app.command("stats")(ops.stats_all)
admin_cmds.producer_app.command("list")(ops.producer_list)
namesrv_cmds.app.command("write-perm")(ops.write_perm)
namesrv_cmds.app.command("update-config")(ops.namesrv_update_config)

# mqadmin's names, hidden, for muscle memory.
for _name, _fn in {"updateTopic": admin_cmds.topic_create, "deleteTopic": admin_cmds.topic_delete,
                   "topicList": admin_cmds.topic_list, "topicRoute": admin_cmds.topic_route,
                   "topicStatus": admin_cmds.topic_status, "clusterList": admin_cmds.cluster_list,
                   "brokerStatus": admin_cmds.broker_status, "consumerProgress": admin_cmds.group_progress,
                   "queryMsgByKey": admin_cmds.message_query, "queryMsgById": admin_cmds.message_query,
                   "consumerConnection": admin_cmds.group_connections, "updateSubGroup": admin_cmds.group_create,
                   "resetOffsetByTime": admin_cmds.group_reset_offset, "queryMsgByOffset": admin_cmds.message_print,
                   "sendMessage": send, "consumeMessage": consume, "haStatus": ha_cmds.status,
                   "deleteSubGroup": admin_cmds.group_delete, "updateTopicPerm": admin_cmds.topic_perm,
                   "getBrokerConfig": admin_cmds.broker_config_get, "updateBrokerConfig": admin_cmds.broker_config_set,
                   "producerConnection": admin_cmds.producer_connections, "printMsg": admin_cmds.message_print,
                   "printMsgByQueue": admin_cmds.message_print, "getNamesrvConfig": admin_cmds.namesrv_config,
                   "updateNamesrvConfig": ops.namesrv_update_config, "brokerConsumeStats": ops.broker_consume_stats,
                   "consumerStatus": ops.group_status, "cloneGroupOffset": ops.group_clone_offset,
                   "queryCq": ops.message_cq, "topicClusterList": ops.topic_clusters, "statsAll": ops.stats_all,
                   "producer": ops.producer_list, "cleanExpiredCQ": ops.clean_expired_cq,
                   "cleanUnusedTopic": ops.clean_unused_topic, "deleteExpiredCommitLog": ops.delete_expired_commitlog,
                   "queryMsgByUniqueKey": admin_cmds.message_query}.items():
    app.command(_name, hidden=True)(_fn)


def main() -> None:
    try:
        app(prog_name="mqtool")
    except BrokenPipeError:
        quiet_broken_pipe()
        sys.exit(0)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # the one boundary where errors become a line and a code
        sys.exit(fail(exc))
