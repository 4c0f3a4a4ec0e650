"""--access-key/--secret-key, defined once for every command that talks to a server (plain ACL).

`@with_credentials` (under `@app.command()`) adds both options to a command; before it runs, the
credentials are found and handed to every client it builds (`DEFAULT_CREDENTIALS`):

    --access-key/--secret-key  >  env MQTOOL_ACCESS_KEY/MQTOOL_SECRET_KEY  >  $ROCKETMQ_HOME/conf/tools.yml
    (accessKey/secretKey, as mqadmin reads them; blank there means unsigned)
"""
from __future__ import annotations

import functools
import inspect
import os
import typing
from typing import Annotated, Optional

import typer

from mqtool.cli.errors import UsageError

AccessKeyOpt = Annotated[Optional[str], typer.Option(
    "--access-key", envvar="MQTOOL_ACCESS_KEY", rich_help_panel="ACL",
    help="Sign requests with this ACL access key (or MQTOOL_ACCESS_KEY, or ROCKETMQ_HOME/conf/tools.yml).")]
SecretKeyOpt = Annotated[Optional[str], typer.Option(
    "--secret-key", envvar="MQTOOL_SECRET_KEY", rich_help_panel="ACL",
    help="The access key's secret (or MQTOOL_SECRET_KEY).")]
TOOLS_FILE = "conf/tools.yml"


def tools_credentials(home: str | None) -> tuple[str, str] | None:
    """AclUtils.getAclRPCHook($ROCKETMQ_HOME/conf/tools.yml): both keys non-blank, else None."""
    if not home:
        return None
    path = os.path.join(home, TOOLS_FILE)
    if not os.path.isfile(path):
        return None
    import yaml
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"{path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        return None
    ak, sk = data.get("accessKey"), data.get("secretKey")
    if ak is None or sk is None or not str(ak).strip() or not str(sk).strip():
        return None
    return str(ak), str(sk)


def resolve(access_key: str | None, secret_key: str | None) -> tuple[str, str] | None:
    if access_key or secret_key:
        if not (access_key and secret_key):
            raise UsageError("--access-key and --secret-key go together (or MQTOOL_ACCESS_KEY/MQTOOL_SECRET_KEY)")
        return access_key, secret_key
    return tools_credentials(os.environ.get("ROCKETMQ_HOME"))


def use(access_key: str | None, secret_key: str | None) -> None:
    """Make the found credentials the default of every client this command builds."""
    found = resolve(access_key, secret_key)
    if found:
        from mqtool.client.base import DEFAULT_CREDENTIALS
        from mqtool_remoting.acl import Credentials
        DEFAULT_CREDENTIALS.set(Credentials(*found))


def with_credentials(fn):
    """Add --access-key/--secret-key to command `fn`; they are set up before it runs."""
    @functools.wraps(fn)
    def command(*args, access_key: str | None = None, secret_key: str | None = None, **kwargs):
        use(access_key, secret_key)
        return fn(*args, **kwargs)
    sig = inspect.signature(fn, eval_str=True)
    extra = [inspect.Parameter("access_key", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=AccessKeyOpt),
             inspect.Parameter("secret_key", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=SecretKeyOpt)]
    command.__signature__ = sig.replace(parameters=[*sig.parameters.values(), *extra])
    command.__annotations__ = {**typing.get_type_hints(fn, include_extras=True),
                               "access_key": AccessKeyOpt, "secret_key": SecretKeyOpt}
    return command
