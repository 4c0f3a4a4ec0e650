"""What a command loads before it runs (issue 44.4): `--help`, `-h` and a shell completion's TAB
run often, so they load typer, rich and the one command module they show, nothing else.
Start-up time itself is measured by benchmarks/cli_startup.py; these tests hold the imports."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
# Run mqtool as the console script does, then list every module loaded (on stderr: stdout is the command's).
RUN = ("import json, runpy, sys; sys.argv = ['mqtool'] + json.loads(sys.argv[1])\n"
       "try:\n    runpy.run_module('mqtool', run_name='__main__')\n"
       "except SystemExit as exc:\n    code = exc.code\nelse:\n    code = 0\n"
       "print(json.dumps([code or 0, sorted(sys.modules)]), file=sys.stderr)")
# typer.rich_utils imports these at its top for Markdown help and pretty tracebacks, which mqtool does not use.
RICH_UNUSED = ("rich.markdown", "markdown_it", "rich.traceback", "rich.syntax", "pygments")


def loaded(args: list[str], env: dict | None = None) -> tuple[int, str, set[str]]:
    """(exit code, stdout, modules loaded) of `mqtool ARGS` in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", RUN, json.dumps(args)], capture_output=True, text=True, cwd=REPO, check=False,
                          env=dict(os.environ, **(env or {})), timeout=60)
    code, modules = json.loads(proc.stderr.strip().splitlines()[-1])
    return code, proc.stdout, set(modules)


def under(modules: set[str], *prefixes: str) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in prefixes or m.startswith(tuple(p + "." for p in prefixes)))


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["store", "verify", "-h"], ["topic", "-h"]])
def test_help_loads_no_markdown_or_traceback_renderer(args):
    code, out, modules = loaded(args)
    assert code == 0 and "Usage" in out, out
    assert not under(modules, *RICH_UNUSED), under(modules, *RICH_UNUSED)


def test_the_help_renderers_stand_ins_are_the_real_classes_when_used():
    """typer.rich_utils got stand-ins for Markdown and Traceback: used, they are rich's own."""
    code = ("from mqtool.cli import rich_utils; import sys; r = rich_utils(); assert 'rich.markdown' not in sys.modules\n"
            "from rich.markdown import Markdown; from rich.traceback import Traceback\n"
            "assert type(r.Markdown('*a*')) is Markdown\n"
            "try:\n    1 / 0\nexcept ZeroDivisionError as exc:\n"
            "    assert type(r.Traceback.from_exception(type(exc), exc, exc.__traceback__)) is Traceback\n"
            "assert isinstance(r.Markdown('b'), Markdown)\n"
            "import typer.rich_utils; assert typer.rich_utils is r")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


def test_a_groups_help_loads_that_groups_commands_only():
    """`store verify -h` loaded every admin command too (mqtool.cli.ops hangs them on their groups)."""
    code, out, modules = loaded(["store", "verify", "-h"])
    assert code == 0 and "verify" in out
    assert set(under(modules, "mqtool.cli")) <= {"mqtool.cli", "mqtool.cli.errors", "mqtool.cli.output",
                                                 "mqtool.cli.recover", "mqtool.cli.store"}, under(modules, "mqtool.cli")
    assert not under(modules, "numpy", "construct", "mqtool_store.verify", "mqtool.client")


def test_the_admin_groups_still_have_the_operator_commands():
    code, out, _ = loaded(["cluster", "-h"])
    assert code == 0 and "stats" in out and "start" in out, out
    code, out, _ = loaded(["broker", "-h"])
    assert code == 0 and "consume-stats" in out, out


def test_verify_of_a_small_store_loads_no_construct(tmp_path):
    """The construct schemas are the spec and the tests' oracle; no command reads through them, so
    none pays construct's import (~40 ms)."""
    from mqtool_store.messagestore import Message, MessageStore
    from mqtool_store.storeconfig import MessageStoreConfig
    with MessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=1 << 20)) as s:
        s.put(Message("T", 0, b"one", {"TAGS": "A"}))
        s.put(Message("T", 0, b"two", {"TAGS": "A"}))
    code, out, modules = loaded(["store", "verify", str(tmp_path)])
    assert code == 0, out
    assert not under(modules, "construct", *RICH_UNUSED), under(modules, "construct", *RICH_UNUSED)


def test_the_schemas_are_still_there_when_asked_for():
    from mqtool_store import checkpoint, commitlog, consumequeue, indexfile
    for module, name in ((commitlog, "MessageRecordSchema"), (commitlog, "BlankRecordSchema"),
                         (checkpoint, "CheckpointSchema"), (consumequeue, "CqUnitSchema"),
                         (indexfile, "IndexHeaderSchema"), (indexfile, "IndexEntrySchema")):
        assert type(getattr(module, name)).__name__ == "Struct", name
    with pytest.raises(AttributeError):
        commitlog.NoSuchSchema  # noqa: B018


def bash_completion(words: str, cword: int) -> tuple[set[str], set[str]]:
    code, out, modules = loaded([], {"_MQTOOL_COMPLETE": "complete_bash", "COMP_WORDS": words,
                                     "COMP_CWORD": str(cword)})
    assert code == 0, out
    return set(out.split()), modules


def test_a_completion_tab_loads_the_completed_group_only():
    """Every TAB ran the whole CLI's build: every command module and everything they import."""
    words, modules = bash_completion("mqtool store ver", 2)
    assert "verify" in words
    assert "mqtool.cli.admin" not in modules and "mqtool.cli.spark" not in modules, under(modules, "mqtool.cli")


def test_completing_a_command_name_offers_every_name_it_starts():
    words, modules = bash_completion("mqtool top", 1)             # `top` is a command and `topic` a group
    assert {"top", "topic"} <= words, words
    assert not under(modules, "mqtool.cli.admin", "mqtool.cli.top")
    words, _ = bash_completion("mqtool topic cr", 2)
    assert "create" in words, words
    zsh = loaded([], {"_MQTOOL_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "mqtool store "})
    assert zsh[0] == 0 and "verify" in zsh[1], zsh[1]
    assert "mqtool.cli.admin" not in zsh[2]
    fish = loaded([], {"_MQTOOL_COMPLETE": "complete_fish", "_TYPER_COMPLETE_FISH_ACTION": "get-args",
                       "_TYPER_COMPLETE_ARGS": "mqtool store du"})
    assert fish[0] == 0 and "dump" in fish[1], fish[1]


def test_a_store_command_starts_no_blas_threads(basic_store):
    """numpy's OpenBLAS starts a thread per core at import, spinning a while (CPU a store command
    loses on a busy machine); mqtool does no linear algebra, so its commands keep one thread."""
    count = ("import os, runpy, sys; sys.argv = ['mqtool', 'store', 'dump', sys.argv[1], '--json', '--limit', '1']\n"
             "try:\n    runpy.run_module('mqtool', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "import numpy\nprint(len(os.listdir('/proc/self/task')), file=sys.stderr)")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    proc = subprocess.run([sys.executable, "-c", count, str(basic_store)], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=60)
    assert '"kind": "message"' in proc.stdout, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "1", proc.stderr
