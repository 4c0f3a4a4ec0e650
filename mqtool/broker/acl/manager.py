"""PlainPermissionManager (4.9.8): the loaded ACL files, the checks of §4, the edits of codes 50-53.

State is per file, as in Java: which file an accessKey lives in (first file wins), each file's
accounts and whitelist, each file's data version. A full `load()` replaces everything or, when a
file is bad, nothing; `load_file()` (one changed file) keeps accounts removed from it in the key
table, so they answer `No PlainAccessResource for accessKey=X` until the next full load.
"""
from __future__ import annotations

import hmac
import logging
import os

from mqtool.broker.acl import files
from mqtool.broker.acl.files import Account, AclError
from mqtool.broker.acl.perms import (ADMIN_CODES, PUB, TRACE_TOPIC, check_permission, check_resource_perms,
                                     is_group, java_split, printable)
from mqtool_remoting.acl import signature

log = logging.getLogger("mqtool.broker.acl")
PPM = "org.apache.rocketmq.acl.plain.PlainPermissionManager"
VALIDATE = f"{PPM}.validate(PlainPermissionManager.java:%d)"
CHECK_PERM = f"{PPM}.checkPerm(PlainPermissionManager.java:%d)"


class PlainPermissionManager:
    def __init__(self, home: str):
        self.home = home
        self.default_file = files.default_file(home)
        self.key_file: dict[str, str] = {}                  # accessKey -> file
        self.accounts: dict[str, dict[str, Account]] = {}   # file -> accessKey -> account
        self.white: list = []                               # global whitelist, all files
        self.white_by_file: dict[str, list] = {}
        self.versions: dict[str, tuple[int, int]] = {}
        self.default_version = (0, files.now_ms())          # deprecated `version`: refreshed by loads only
        self.file_list: list[str] = []
        self.load()

    # ------------------------------------------------------------------ loading

    def _assure_default(self) -> None:
        if not os.path.exists(self.default_file):
            try:
                os.makedirs(os.path.dirname(self.default_file), exist_ok=True)
                open(self.default_file, "a").close()
            except OSError as exc:
                raise AclError(str(exc)) from None

    def load(self) -> None:
        """Every file; on any error nothing changes and the error (with its file) is raised."""
        self._assure_default()
        file_list = files.acl_files(self.home)
        key_file, accounts, white, white_by_file, versions = {}, {}, [], {}, {}
        for path in file_list:
            try:
                data = files.read_raw(path)
                if not data:
                    log.warning("No data in file %s", path)
                    continue
                f = files.parse(path, data)
            except AclError as exc:
                raise AclError(f"{path}: {exc.message}") from None
            if f.white:
                white_by_file[path] = f.white
                white += f.white
            mine = {}
            for acc in f.accounts:
                if acc.access_key in key_file:
                    log.warning("The accessKey %s is repeated in multiple ACL files", acc.access_key)
                    continue
                mine[acc.access_key] = acc
                key_file[acc.access_key] = path
            if mine:
                accounts[path] = mine
            versions[path] = f.version
        if self.default_file in versions:
            self.default_version = versions[self.default_file]
        self.file_list, self.key_file, self.accounts = file_list, key_file, accounts
        self.white, self.white_by_file, self.versions = white, white_by_file, versions

    def load_file(self, path: str) -> None:
        """load(aclFilePath): one changed file; an empty one is skipped, a bad one raises."""
        data = files.read_raw(path)
        if not data:
            log.warning("No data in %s, skip it", path)
            return
        f = files.parse(path, data)
        old = self.white_by_file.get(path)
        self.white = [w for w in self.white if not (old and any(w is o for o in old))] + f.white
        if old is not None:
            self.white_by_file[path] = f.white
        mine = {}
        for acc in f.accounts:
            if self.key_file.get(acc.access_key) in (None, path):
                mine[acc.access_key] = acc
                self.key_file[acc.access_key] = path
        self.accounts[path] = mine
        self.versions[path] = f.version
        if path == self.default_file:
            self.default_version = f.version

    # ------------------------------------------------------------------ checking

    def validate(self, res) -> None:
        """validate(PlainAccessResource): raises AclError at the first failing step, returns on a pass."""
        if any(m(res.ip) for _p, m in self.white):
            return
        ak = res.access_key
        if ak is None:
            raise AclError("No accessKey is configured", VALIDATE % 664)
        if ak not in self.key_file:
            raise AclError(f"No acl config for {ak}", VALIDATE % 668)
        owned = self.accounts.get(self.key_file[ak], {}).get(ak)
        if owned is None:
            raise AclError(f"No PlainAccessResource for accessKey={ak}", VALIDATE % 675)
        if owned.matcher(res.ip):
            return
        expected = signature(owned.secret_key, res.content).encode()
        if not hmac.compare_digest(expected, (res.signature or "").encode("utf-8", "replace")):   # Java: equals
            raise AclError(f"Check signature failed for accessKey={ak}", VALIDATE % 684)
        if res.needed.get(TRACE_TOPIC) == PUB:
            return
        check_perm(res, owned)

    # ------------------------------------------------------------------ admin requests (50-53)

    def update_account(self, cfg: dict) -> None:
        """updateAccessConfig: merge into the key's own file (entry moved last) or append to the
        default file; memory takes the request's account at once, the file at the next reload."""
        files.check_keys(cfg.get("accessKey"), cfg.get("secretKey"))
        check_resource_perms(cfg.get("topicPerms"))
        check_resource_perms(cfg.get("groupPerms"))
        ak = cfg["accessKey"]
        built = Account.build(cfg)
        path = self.key_file.get(ak)
        if path is not None:
            data = files.read_raw(path) or {}
            accounts = data.get(files.ACCOUNTS)
            if accounts is None:
                data[files.ACCOUNTS] = [_merged(None, cfg)]
            else:
                for i, entry in enumerate(accounts):
                    if isinstance(entry, dict) and files.text(entry.get("accessKey")) == ak:
                        accounts.append(_merged(accounts.pop(i), cfg))
                        break
            mine = self.accounts.setdefault(path, {})
            if not mine or ak in mine:
                mine[ak] = built
        else:
            path = self.default_file
            self._assure_default()
            data = files.read_raw(path) or {files.ACCOUNTS: []}
            if data.get(files.ACCOUNTS) is None:
                data[files.ACCOUNTS] = []
            data[files.ACCOUNTS].append(_merged(None, cfg))
            self.key_file[ak] = path
            self.accounts.setdefault(path, {})[ak] = built
        self._write(path, data)

    def delete_account(self, ak: str | None) -> bool:
        """deleteAccessConfig: out of its file and of the key table at once."""
        if not ak or ak not in self.key_file:
            return False
        path = self.key_file[ak]
        data = files.read_raw(path)
        if not data:
            return True
        accounts = data.get(files.ACCOUNTS) or []
        for i, entry in enumerate(accounts):
            if isinstance(entry, dict) and files.text(entry.get("accessKey")) == ak:
                del accounts[i]
                del self.key_file[ak]
                data[files.ACCOUNTS] = accounts
                self._write(path, data)
                return True
        return False

    def update_white_list(self, addrs: list[str] | None, path: str | None = None) -> bool:
        """updateGlobalWhiteAddrsConfig: rewrites one file's whitelist; live at the next reload."""
        path = path or self.default_file
        if addrs is None or not os.path.exists(path) or os.path.isdir(path):
            return False
        if not path.startswith(self.home):
            return False
        if not path.endswith(".yml") and path.endswith(".yaml"):    # sic: 4.9.8 refuses .yaml here
            return False
        data = files.read_raw(path) or {}
        data[files.WHITE_LIST] = list(addrs)
        self._write(path, data)
        return True

    def _write(self, path: str, data: dict) -> None:
        self.versions[path] = files.write(path, data, files.file_counter(data))

    def version_info(self) -> tuple[dict, dict]:
        """(deprecated default-file version, {file: version}) for GET_BROKER_CLUSTER_ACL_INFO."""
        def js(v):
            return {"counter": v[0], "timestamp": v[1]}
        return js(self.default_version), {p: js(v) for p, v in self.versions.items()}

    def all_config(self) -> dict:
        """Every account (first file wins) and every whitelist pattern, for `mqtool acl list --local`."""
        return {"globalWhiteAddrs": [p for p, _m in self.white],
                "accounts": [acc for path in self.file_list for acc in self.accounts.get(path, {}).values()]}


def _merged(existing: dict | None, cfg: dict) -> dict:
    """createAclAccessConfigMap: the request's non-null fields over the entry; `admin` always."""
    out = existing if existing is not None else {}
    out["accessKey"] = cfg["accessKey"]
    if cfg.get("secretKey"):
        out["secretKey"] = cfg["secretKey"]
    if cfg.get("whiteRemoteAddress") is not None:
        out["whiteRemoteAddress"] = cfg["whiteRemoteAddress"]
    out["admin"] = bool(cfg.get("admin"))
    for key in ("defaultTopicPerm", "defaultGroupPerm"):
        if cfg.get(key):
            out[key] = cfg[key]
    for key in ("topicPerms", "groupPerms"):
        if cfg.get(key) is not None:
            out[key] = list(cfg[key])
    return out


def check_perm(res, owned: Account) -> None:
    """checkPerm: admin codes, then each needed resource against its explicit or default perm."""
    if res.code in ADMIN_CODES and not owned.admin:
        raise AclError(f"Need admin permission for request code={res.code}, but accessKey={owned.access_key} "
                       f"is not", CHECK_PERM % 581)
    if not res.needed or (owned.perms is None and owned.admin):
        return
    for resource, needed in res.needed.items():
        group = is_group(resource)
        if owned.perms is None or resource not in owned.perms:
            have = owned.default_group if group else owned.default_topic
            line = 606
        else:
            have, line = owned.perms[resource], 611
        if not check_permission(needed, have):
            raise AclError(f"No default permission for {printable(resource)}", CHECK_PERM % line)


def split_list(value: str | None) -> list[str] | None:
    """UtilAll.split(value, ","): a header's comma list."""
    return None if value is None else java_split(value, ",")
