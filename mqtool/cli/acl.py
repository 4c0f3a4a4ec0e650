"""`mqtool acl ...`: plain ACL accounts and whitelists on brokers (codes 50-53), and request signing."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mqtool.cli.admin import JsonOpt, out_rows
from mqtool.cli.auth import AccessKeyOpt, SecretKeyOpt, resolve, with_credentials
from mqtool.cli.errors import UsageError
from mqtool.cli.output import console, emit_json, fmt_time
from mqtool.cli.send import NamesrvOpt

app = typer.Typer(help="Plain ACL: accounts, whitelists, versions on brokers; sign a request.", no_args_is_help=True)
BrokerOpt = Annotated[Optional[str], typer.Option("-b", "--broker", help="Broker address HOST:PORT (or name).")]
ClusterOpt = Annotated[Optional[str], typer.Option("-c", "--cluster", help="Every broker of this cluster.")]
AccountOpt = Annotated[str, typer.Option("-a", "--account", help="The account's accessKey.")]


def _each(namesrv: str, broker: str | None, cluster: str | None, slaves: bool, call) -> list[dict]:
    """`call(admin, addr)` on every target broker; one row per broker, a failure is its row's error."""
    import asyncio

    from mqtool.client import acl
    from mqtool.client.admin import Admin
    from mqtool_remoting.errors import RemotingCommandError, RemotingError, RemotingTimeout

    async def go():
        admin = Admin(namesrv)
        rows = []
        try:
            for addr in await acl.brokers(admin, broker, cluster, slaves):
                try:
                    rows.append({"broker": addr, "ok": True, **(await call(admin, addr) or {})})
                except RemotingTimeout:
                    rows.append({"broker": addr, "ok": False, "error": "no answer (a 4.9.8 broker without "
                                 "aclEnable=true never answers ACL requests)"})
                except RemotingCommandError as exc:     # the row names the account and the broker already
                    error = exc.answer
                    if '"accessValidator" is null' in error:     # 4.9.8's own words for a broker without ACL
                        error += " (the broker runs without aclEnable=true)"
                    rows.append({"broker": addr, "ok": False, "error": error})
                except RemotingError as exc:
                    rows.append({"broker": addr, "ok": False, "error": str(exc)})
        finally:
            await admin.close()
        return rows
    return asyncio.run(go())


def _report(rows: list[dict], json_out: bool, what: str) -> None:
    if json_out:
        for r in rows:
            emit_json(r)
    else:
        for r in rows:
            console.print(f"{what} on {r['broker']}: " + ("OK" if r["ok"] else f"FAILED: {r['error']}"), markup=False)
    if not rows:
        raise UsageError("no broker found")
    if not all(r["ok"] for r in rows):
        raise typer.Exit(1)


@with_credentials
def acl_list(namesrv: NamesrvOpt = "127.0.0.1:9876", broker: BrokerOpt = None, cluster: ClusterOpt = None,
             json_out: JsonOpt = False) -> None:
    """Each master's ACL files and their data versions (a 4.9.8 broker never hands out its accounts)."""
    from mqtool.client import acl
    rows = _each(namesrv, broker, cluster, False, acl.version)
    if json_out:
        for r in rows:
            emit_json(r)
    else:
        flat = []
        for r in rows:
            if not r["ok"]:
                flat.append({"broker": r["broker"], "file": f"FAILED: {r['error']}"})
            for path, v in sorted(r.get("files", {}).items()):
                flat.append({"broker": r["broker"], "file": path, "counter": v.get("counter"),
                             "changed": fmt_time(v.get("timestamp"))})
        out_rows(flat, False, ["broker", "file", "counter", "changed"])
    if not all(r["ok"] for r in rows):
        raise typer.Exit(1)


@with_credentials
def acl_update(account: AccountOpt,
               secret: Annotated[str, typer.Option("-s", "--secret", help="The account's secretKey (> 6 chars).")],
               namesrv: NamesrvOpt = "127.0.0.1:9876", broker: BrokerOpt = None, cluster: ClusterOpt = None,
               white: Annotated[Optional[str], typer.Option("-w", "--white-address",
                                                            help="The account's address pattern: its requests "
                                                                 "skip signature and permission checks.")] = None,
               topic_default: Annotated[Optional[str], typer.Option("-i", "--default-topic-perm",
                                                                    help="DENY, PUB, SUB or PUB|SUB.")] = None,
               group_default: Annotated[Optional[str], typer.Option("-u", "--default-group-perm")] = None,
               topics: Annotated[Optional[str], typer.Option("-t", "--topic-perms",
                                                             help="topicA=PUB|SUB,topicB=SUB")] = None,
               groups: Annotated[Optional[str], typer.Option("-g", "--group-perms", help="groupA=SUB,...")] = None,
               admin_: Annotated[bool, typer.Option("-m", "--admin", help="May create/delete topics and groups "
                                                    "and update the broker config.")] = False,
               json_out: JsonOpt = False) -> None:
    """Create or update an account (the fields given, and admin always): request 50."""
    from mqtool.client import acl
    from mqtool_remoting.headers import PlainAccessConfigHeader
    header = PlainAccessConfigHeader(account, secret, white, admin_, topic_default, group_default, topics, groups)
    rows = _each(namesrv, broker, cluster, True, lambda a, addr: acl.update_account(a, addr, header))
    _report(rows, json_out, f"account {account}")


@with_credentials
def acl_delete(account: AccountOpt, namesrv: NamesrvOpt = "127.0.0.1:9876", broker: BrokerOpt = None,
               cluster: ClusterOpt = None, json_out: JsonOpt = False) -> None:
    """Delete an account from its file: request 51."""
    from mqtool.client import acl
    rows = _each(namesrv, broker, cluster, True, lambda a, addr: acl.delete_account(a, addr, account))
    _report(rows, json_out, f"delete account {account}")


@with_credentials
def acl_whitelist(addrs: Annotated[str, typer.Option("-g", "--global-white-addrs",
                                                     help="Comma list of address patterns (replaces the file's).")],
                  namesrv: NamesrvOpt = "127.0.0.1:9876", broker: BrokerOpt = None, cluster: ClusterOpt = None,
                  file: Annotated[Optional[str], typer.Option("-p", "--file", help="The ACL file on the broker "
                                                              "(default: its conf/plain_acl.yml).")] = None,
                  json_out: JsonOpt = False) -> None:
    """Replace one ACL file's global whitelist (live within 5 s): request 53."""
    from mqtool.client import acl
    if "{" in addrs:
        raise UsageError("a {a,b} pattern cannot be sent: the broker splits the list at every comma "
                         "(write it into the file, or list the addresses one by one)")
    rows = _each(namesrv, broker, cluster, True,
                 lambda a, addr: acl.update_white_list(a, addr, addrs.split(","), file))
    _report(rows, json_out, "global whitelist")


def acl_sign(code: Annotated[int, typer.Option("--code", help="Request code (310 SEND_MESSAGE_V2, 11 PULL ...).")],
             ext: Annotated[Optional[list[str]], typer.Option("-e", "--ext", help="key=value, repeatable.")] = None,
             ext_json: Annotated[Optional[str], typer.Option("--ext-json", help="extFields as a JSON object "
                                                             "(e.g. copied from a log).")] = None,
             body: Annotated[Optional[str], typer.Option("--body", help="Body text (UTF-8).")] = None,
             body_hex: Annotated[Optional[str], typer.Option("--body-hex")] = None,
             body_file: Annotated[Optional[Path], typer.Option("--body-file")] = None,
             token: Annotated[Optional[str], typer.Option("--token", help="SecurityToken.")] = None,
             java_client: Annotated[bool, typer.Option("--java-client", help="Sign _UNIQUE_KEY_QUERY too, as the "
                                                       "4.9.8 Java client does (the broker will refuse it).")] = False,
             access_key: AccessKeyOpt = None, secret_key: SecretKeyOpt = None, json_out: JsonOpt = False) -> None:
    """Print a request's content-to-sign and the signature a broker expects (offline)."""
    import json

    from mqtool_remoting.acl import (ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, broker_content, content_to_sign,
                                     java_order, signature)
    fields: dict[str, str] = {}
    if ext_json:
        try:
            loaded = json.loads(ext_json)
        except ValueError as exc:
            raise UsageError(f"--ext-json: {exc}") from None
        if not isinstance(loaded, dict):
            raise UsageError("--ext-json must be a JSON object")
        fields.update({str(k): _java_text(v) for k, v in loaded.items() if v is not None})
    for item in ext or []:
        key, eq, value = item.partition("=")
        if not eq:
            raise UsageError(f"--ext {item!r}: expected key=value")
        fields[key] = value
    if sum(x is not None for x in (body, body_hex, body_file)) > 1:
        raise UsageError("give one of --body, --body-hex, --body-file")
    try:
        raw = body.encode() if body is not None else bytes.fromhex(body_hex) if body_hex is not None else \
            body_file.read_bytes() if body_file is not None else b""
    except (ValueError, OSError) as exc:
        raise UsageError(f"body: {exc}") from None
    creds = resolve(access_key, secret_key)
    if creds is None:
        raise UsageError("give --access-key and --secret-key (or MQTOOL_ACCESS_KEY/MQTOOL_SECRET_KEY)")
    given = fields.get(SIGNATURE)
    fields[ACCESS_KEY] = creds[0]
    if token is not None:
        fields[SECURITY_TOKEN] = token
    client_content = content_to_sign(fields, raw)
    broker_view = broker_content(fields, raw)
    expected = signature(creds[1], broker_view)
    out = {"code": code, "keys": [k for k in sorted(fields, key=java_order) if k != SIGNATURE],
           "content": broker_view.decode("utf-8", "replace"), "content_hex": broker_view.hex(),
           "content_length": len(broker_view), "signature": expected}
    if java_client and client_content != broker_view:
        out["java_client_signature"] = signature(creds[1], client_content)
        out["java_client_note"] = "the 4.9.8 Java client signs _UNIQUE_KEY_QUERY, which the broker leaves out"
    if given is not None:
        out["given_signature"] = given
        out["matches"] = given == expected
    if json_out:
        emit_json(out)
    else:
        for key, value in out.items():
            console.print(f"{key:22} {value!r}" if key == "content" else f"{key:22} {value}", markup=False)
    if given is not None and given != expected:
        raise typer.Exit(1)


def _java_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


app.command("list")(acl_list)
app.command("create")(acl_update)
app.command("update")(acl_update)
app.command("delete")(acl_delete)
app.command("whitelist")(acl_whitelist)
app.command("sign")(acl_sign)
