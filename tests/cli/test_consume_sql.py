"""`mqtool consume --sql EXPR`: checked before anything is sent, then filtered by a real broker
process with enablePropertyFilter=true (explicit queues and a group), refused by one without."""
from __future__ import annotations

import pytest

from tests.conftest import json_lines, run_cli
from tests.servers import Process, free_port, start_broker


@pytest.mark.parametrize("args, text", [
    (["--sql", "a > '5'"], "--sql \"a > '5'\": Value ''5'' cannot be compared."),
    (["--sql", "a != 1"], 'Lexical error at line 1, column 3.  Encountered: "!" (33)'),
    (["--sql", "a NOT 5"], 'Encountered " "NOT" "NOT "" at line 1, column 3. Was expecting one of: "BETWEEN", "IN", '
                           '">", ">=", "<", "<="'),
    (["--sql", "a IS"], 'Encountered "<EOF>" at line 1, column 4. Was expecting: "NOT"'),
    (["--sql", "a = 1", "--tag", "TagA"], "give either --tag or --sql, not both"),
])
def test_a_bad_expression_is_one_line_before_any_request(args, text):
    proc = run_cli("consume", "-n", "127.0.0.1:1", "-t", "T", "-e", *args)      # no name server there
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and text in proc.stderr, proc.stderr


@pytest.mark.parametrize("sql, warning", [
    ("region = 'eu' AND amount > 100", None),                                   # the README's: read as written
    ("NOT a = 'x'", "mqtool: warning: --sql \"NOT a = 'x'\": (NOT a) compared with the text 'x' never matches"),
    ("a = 'x' b = 'y'", "mqtool: warning: --sql \"a = 'x' b = 'y'\" is read as \"a = 'x'\": the text after"),
])
def test_the_reading_is_named_only_where_it_differs_from_the_text(sql, warning):
    proc = run_cli("consume", "-n", "127.0.0.1:1", "-t", "T", "-e", "--sql", sql)     # warned before connecting
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("mqtool: warning:")]
    if warning is None:
        assert warnings == [], proc.stderr
    else:
        assert warnings and warnings[0].startswith(warning), proc.stderr


@pytest.mark.slow
def test_consume_with_sql_against_brokers_with_and_without_the_flag(tmp_path):
    ns_port = free_port()
    ns = Process(["namesrv", "start", "--listen", f"127.0.0.1:{ns_port}", "--kv-config", str(tmp_path / "kv.json")],
                 "boot success")
    ns_addr = f"127.0.0.1:{ns_port}"
    broker, _ = start_broker(tmp_path, ns_addr, "broker-sql", "enablePropertyFilter=true\n")
    try:
        run_cli("topic", "create", "-n", ns_addr, "-t", "Orders", "-c", "DefaultCluster", "-r", "2", "-w", "2",
                check=True)
        for region, amount in [("eu", "250"), ("us", "250"), ("eu", "50"), ("eu", "101")]:
            run_cli("send", "-n", ns_addr, "-t", "Orders", "-p", f"region={region}", "-p", f"amount={amount}",
                    f"{region}-{amount}", check=True)
        sql = "region = 'eu' AND amount > 100"
        queues = json_lines(run_cli("consume", "-n", ns_addr, "-t", "Orders", "-e", "--json", "--sql", sql,
                                    check=True).stdout)
        assert sorted(m["body"] for m in queues) == ["eu-101", "eu-250"]
        group = json_lines(run_cli("consume", "-n", ns_addr, "-t", "Orders", "-g", "SqlCli", "-e", "--json",
                                   "--sql", sql, check=True).stdout)
        assert sorted(m["body"] for m in group) == ["eu-101", "eu-250"]
        quirk = run_cli("consume", "-n", ns_addr, "-t", "Orders", "-e", "--json", "--sql", "region = 'us' amount > 1")
        assert quirk.returncode == 0 and "is read as \"region = 'us'\"" in quirk.stderr
        assert [m["body"] for m in json_lines(quirk.stdout)] == ["us-250"]
    finally:
        assert broker.stop() == 0
    plain, _ = start_broker(tmp_path, ns_addr, "broker-sql")             # the same store, without the flag
    try:
        refused = run_cli("consume", "-n", ns_addr, "-t", "Orders", "-e", "--sql", "region = 'eu'")
        assert refused.returncode == 1
        assert "The broker does not support consumer to filter message by SQL92" in refused.stderr
        assert refused.stderr.count("\n") == 1, refused.stderr
    finally:
        assert plain.stop() == 0
        assert ns.stop() == 0
