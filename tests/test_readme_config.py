"""Every config snippet of the README loads as written (issue 44: the controller-mode broker.conf had
inline comments, which Java properties do not have, and both replicas exited on `brokerId`).

Each properties/conf/ini/yaml/toml block is marked on the line before it with what reads it:
`<!-- config-check: broker -->`, `namesrv` or `controller` (loaded here as that server loads its -c
file, and must give no warning), or `<!-- config-check: none: WHY -->` for a file mqtool does not
read (Prometheus's, say)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

README = (Path(__file__).parent.parent / "README.md").read_text()
CONFIG_LANGS = ("properties", "conf", "ini", "yaml", "yml", "toml")
MARK = re.compile(r"<!-- config-check: (broker|namesrv|controller|none: \S.*) -->")


def config_blocks() -> list[tuple[int, str, str, str]]:
    """(line number, language, the marker's kind or '', the block's text) of each config block."""
    lines = README.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        fence = re.fullmatch(r"```(\w+)\s*", lines[i])
        if fence is None:
            if lines[i].startswith("```"):            # another language's block: skip to its end
                i = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        if fence.group(1) in CONFIG_LANGS:
            mark = MARK.fullmatch(lines[i - 1].strip()) if i else None
            blocks.append((i + 1, fence.group(1), mark.group(1) if mark else "", "\n".join(lines[i + 1:end]) + "\n"))
        i = end + 1
    return blocks


BLOCKS = config_blocks()


def load_broker(path: Path, tmp_path: Path) -> list[str]:
    """What `mqtool broker start -c path` does with the file before it starts anything: its warnings."""
    from mqtool.broker.config import BrokerConfig, apply_properties, load_broker_conf
    from mqtool.broker.controller import BrokerController
    cfg = BrokerConfig(brokerName="broker-a")
    rest = apply_properties(cfg, load_broker_conf(path))
    cfg.storePathRootDir = str(tmp_path / "store")        # as --store-dir: nothing written outside the test
    return BrokerController(cfg, rest).notes


def load_controller(path: Path, also_known: tuple[str, ...] = ()) -> list[str]:
    """What `mqtool controller start -c path` does with the file: its warnings."""
    from mqtool.cli.controller import read_props
    from mqtool.controller.config import load
    return load(read_props(path), also_known)[1]


def load_namesrv(path: Path) -> list[str]:
    """What `mqtool namesrv start -c path` does with the file: its warnings (and its controller's)."""
    from mqtool_remoting import javaprops

    from mqtool.cli.namesrv import NAMESRV_KEYS
    from mqtool.common.javakeys import check_keys
    props = javaprops.loads(path.read_text(encoding="utf-8"))
    if props.get("enableControllerInNamesrv", "").strip().lower() == "true":
        return load_controller(path, NAMESRV_KEYS)
    return check_keys({k: v for k, v in props.items() if k not in NAMESRV_KEYS}, list(NAMESRV_KEYS),
                      server="name server")


def test_the_readme_has_config_blocks():
    assert len(BLOCKS) >= 3, "no config block found: the pattern is stale"


@pytest.mark.parametrize("line, lang, kind, text", BLOCKS, ids=[f"line{b[0]}" for b in BLOCKS])
def test_each_config_block_loads_as_written(tmp_path, line, lang, kind, text):
    assert kind, (f"README.md line {line}: a ```{lang} block with no `<!-- config-check: broker|namesrv|controller"
                  " -->` (or `none: WHY`) on the line before it")
    if kind.startswith("none"):
        return
    assert lang in ("properties", "conf"), f"README.md line {line}: a {kind} config is Java properties, not {lang}"
    path = tmp_path / f"{kind}.conf"
    path.write_text(text)
    try:
        notes = {"broker": lambda: load_broker(path, tmp_path), "namesrv": lambda: load_namesrv(path),
                 "controller": lambda: load_controller(path)}[kind]()
    except ValueError as exc:                   # what the server's start would have exited with
        raise AssertionError(f"README.md line {line}: the {kind} refuses the snippet: {exc}") from None
    assert notes == [], f"README.md line {line}: the {kind} warns: {notes}"
