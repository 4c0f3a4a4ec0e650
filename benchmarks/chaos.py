"""Chaos harness for controller-mode failover (issue 43), in the spirit of Jepsen and OpenChaos.

Every process on a "host" of its own (a Linux network namespace, benchmarks/netns.py): the name
server with its embedded controller (or three standalone controllers, --controllers 3) and R replicas
of one broker group. A steady producer (mqtool's client, in this process) sends small messages with
unique keys (c1, c2, ...) and records each SEND_OK. Seeded random faults, one at a time, each healed
after a bounded time: kill -9 (and restart) of the master, a replica or the controller; SIGSTOP and
SIGCONT of the master; a host cut off entirely; the master cut from the controller and the replicas
while the producer still reaches it; a congested host (tbf).

At the end, healed and settled: the producer stops; each replica in turn is made master
(CONTROLLER_ELECT_MASTER, as `mqtool ha elect --broker-id`) and every queue of the topic is read
from it, min to max offset: each acknowledged key must be there, once. Then every process is stopped,
`mqtool store verify --json` runs on each replica's store, the commit logs are compared byte for byte
up to the shorter one, and every process log is searched for "Traceback". Exit 1 when a message is
missing, a verify is not clean, a log holds a traceback, the commit logs differ, or a check could not
run. Needs root, `ip` and `tc` (it says why and exits 0 with --quick otherwise).

    python benchmarks/chaos.py [--replicas 3] [--duration 300] [--seed N] [--faults kill-master,congest]
        [--controllers 1|3] [--short|--quick] [--keep] [--all-ack false] [--scenario isolate-master] [--json]
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chaoscheck
import netns
from chaosgroup import ChaosGroup

from mqtool.client.admin import Admin
from mqtool.client.producer import OutMessage, Producer

TOPIC, QUEUES = "ChaosTopic", 4
KINDS = ("kill-master", "kill-replica", "kill-controller", "pause-master", "isolate-host", "isolate-master",
         "congest")
HOLD_S = {"kill-master": (1, 4), "kill-replica": (1, 4), "kill-controller": (1, 4), "pause-master": (2, 8),
          "isolate-host": (3, 10), "isolate-master": (4, 10), "congest": (3, 10)}
ISOLATE_HOLD_S = 10             # --scenario isolate-master: past the 3 s heartbeat timeout and an election
SETTLE_S = 60                   # the longest wait for a full SyncStateSet after a heal (--short: half)
GAP_S = (1.0, 4.0)              # between one fault's recovery and the next
QUICK_SEED = 43
SEND_PAUSE_S = 0.02             # one message in flight, then this: ~40 msg/s, light on 2 shared cores


class Load:
    """One message in flight; each attempt a new key, so a key read twice is a real duplicate."""

    def __init__(self, ns: str, t0: float):
        self.ns, self.t0 = ns, t0
        self.acked: dict[str, dict] = {}
        self.failed = 0
        self.gaps: list[tuple[float, float]] = []      # (longest gap, when it ended)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True, name="load")

    async def _run(self) -> None:
        p = Producer(self.ns, timeout_s=3, retries=0)
        seq, last_ok = 0, time.monotonic()
        try:
            while not self.stop.is_set():
                seq += 1
                key = f"c{seq}"
                try:
                    r = await p.send(OutMessage(TOPIC, f"{seq} ".encode().ljust(64, b"."), keys=[key]))
                except Exception:  # noqa: BLE001 - no master routed, a dead connection: the next key
                    r = None
                now = time.monotonic()
                if r is not None and r.status == "SEND_OK":
                    self.acked[key] = {"msgId": r.msg_id, "queue": r.queue_id, "offset": r.queue_offset,
                                       "broker": r.broker_addr, "t": round(now - self.t0, 3)}
                    self.gaps.append((now - last_ok, now - self.t0))
                    last_ok = now
                    await asyncio.sleep(SEND_PAUSE_S)
                else:
                    self.failed += 1
                    with contextlib.suppress(Exception):       # the name server unreachable: later
                        await p.publish_route(TOPIC, refresh=True)
                    await asyncio.sleep(0.1)
        finally:
            await p.close()

    def longest_gap(self, since: float = 0.0, until: float = float("inf")) -> dict:
        """The longest time without a SEND_OK among the gaps that overlap [since, until] (s from t0)."""
        gaps = [g for g in list(self.gaps) if g[1] >= since and g[1] - g[0] <= until]
        if not gaps:
            return {"s": None, "ended_at": None}
        g = max(gaps)
        return {"s": round(g[0], 3), "ended_at": round(g[1], 3)}


class Monitor:
    """The controller's view every 0.3 s: (t, {"master", "epoch", "in_sync"}) or (t, None)."""

    def __init__(self, group: ChaosGroup, t0: float):
        self.group, self.t0, self.timeline = group, t0, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="monitor")

    def _run(self) -> None:
        while not self.stop.is_set():
            self.timeline.append((time.monotonic(), self.group.sync_state()))
            self.stop.wait(0.3)

    def last(self) -> dict | None:
        return self.timeline[-1][1] if self.timeline else None

    def first(self, since: float, pred) -> float | None:
        return next((t for t, s in list(self.timeline) if t >= since and pred(s)), None)


def log(msg: str, t0: float, quiet: bool) -> None:
    if not quiet:
        print(f"{wall()} [{time.monotonic() - t0:7.2f}] {msg}", file=sys.stderr, flush=True)


def wall() -> str:
    """The wall clock as the processes' logs show it (UTC, ms), to find a fault's moment in them."""
    now = time.time()
    return time.strftime("%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}"


def wait_for(what: str, check, timeout: float, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = check()
        if v:
            return v
        time.sleep(every)
    return None


class Faults:
    """Inject one fault; return (target, heal)."""

    def __init__(self, group: ChaosGroup, net: netns.Network, rng: random.Random):
        self.g, self.net, self.rng = group, net, rng

    def master(self) -> str:
        s = self.g.sync_state()
        return (s and s["master"]) or self.g.routed_master() or self.rng.choice(self.g.brokers)

    def inject(self, kind: str):
        g, rng = self.g, self.rng
        if kind in ("kill-master", "kill-replica", "kill-controller"):
            if kind == "kill-master":
                target = self.master()
            elif kind == "kill-replica":
                m = self.master()
                target = rng.choice([b for b in g.brokers if b != m] or g.brokers)
            else:
                target = rng.choice(g.controller_hosts)
            g.kill(target)
            return target, lambda: g.start(target)
        if kind == "pause-master":
            target = self.master()
            g.signal(target, signal.SIGSTOP)
            return target, lambda: g.signal(target, signal.SIGCONT)
        if kind == "isolate-host":
            target = rng.choice(g.host_names)
            self.net.isolate(target)
            return target, self.net.heal
        if kind == "isolate-master":
            target = self.master()
            self.net.cut(target, [h for h in g.host_names if h != target])
            return target, self.net.heal
        if kind == "congest":
            target = rng.choice(g.host_names)
            self.net.congest(target)
            return target, self.net.heal
        raise ValueError(kind)


def run_fault(kind: str, hold: float, faults: Faults, mon: Monitor, load: Load, t0: float, quiet: bool,
              settle: float = SETTLE_S) -> dict:
    g = faults.g
    before = mon.last() or g.sync_state() or {}
    start, at_utc = time.monotonic(), wall()
    target, heal = faults.inject(kind)
    log(f"fault {kind} on {target} (master was {before.get('master')}, epoch {before.get('epoch')}), "
        f"healed in {hold:.1f} s", t0, quiet)
    time.sleep(hold)
    heal_error = None
    try:
        heal()
    except Exception as exc:  # noqa: BLE001 - a restart that failed: reported, the run goes on
        heal_error = f"{type(exc).__name__}: {str(exc)[-400:]}"
    healed = time.monotonic()
    log(f"healed {kind} on {target}" + (f": {heal_error}" if heal_error else ""), t0, quiet)
    full = wait_for("a full SyncStateSet", lambda: g.full(mon.last()) and mon.timeline[-1][0] > healed, settle)
    epoch0 = before.get("epoch") or 0
    new_master = mon.first(start, lambda s: s and s["master"] and s["epoch"] > epoch0)
    full_at = mon.first(healed, g.full) if full else None
    rec = {"kind": kind, "target": target, "at_s": round(start - t0, 3), "at_utc": at_utc, "hold_s": round(hold, 3),
           "master_before": before.get("master"), "epoch_before": epoch0,
           "new_master_s": round(new_master - start, 3) if new_master else None,
           "new_master": next((s["master"] for t, s in mon.timeline if t == new_master), None) if new_master else None,
           "full_sync_state_set_s": round(full_at - start, 3) if full_at else None,
           "full_after_heal_s": round(full_at - healed, 3) if full_at else None,
           "send_gap_s": load.longest_gap(start - t0, time.monotonic() - t0)["s"]}
    if new_master:      # each replica back in the new master's SyncStateSet (a slave that follows late shows here)
        rec["in_sync_again_s"] = {}
        for b in g.brokers:
            t = mon.first(new_master, lambda s, b=b: s and s["epoch"] > epoch0 and b in s["in_sync"])
            rec["in_sync_again_s"][b] = round(t - start, 3) if t else None
    if heal_error:
        rec["heal_error"] = heal_error
    log(f"  -> new master after {rec['new_master_s']} s ({rec['new_master']}), full SyncStateSet after "
        f"{rec['full_sync_state_set_s']} s, longest send gap {rec['send_gap_s']} s"
        + (f", each in sync again after {rec['in_sync_again_s']}" if new_master else ""), t0, quiet)
    return rec


def check_replicas(g: ChaosGroup, load: Load, t0: float, quiet: bool, settle: float = SETTLE_S) -> dict:
    """Each replica made master in turn and read from: missing and duplicate acknowledged keys."""
    out = {}
    for b in g.brokers:
        res: dict = {}
        if not wait_for("full", lambda: g.full(g.sync_state()), settle):
            res["warning"] = f"no full SyncStateSet before electing {b}: {g.sync_state()}"
        state = g.sync_state() or {}
        if state.get("master") != b:
            why = g.elect(b)
            if why:
                res["error"] = f"elect {b}: {why}"
        if not wait_for(f"{b} routed as master", lambda b=b: g.routed_master() == b, 30):
            res.setdefault("error", f"{b} not routed as master within 30 s (controller: {g.sync_state()})")
        if "error" not in res:
            try:
                read = chaoscheck.read_from(g.ns_addr, g.addr(b), TOPIC, QUEUES)
                res |= chaoscheck.compare(load.acked, read["keys"])
                res["queues"] = read["queues"]
                if read["errors"]:
                    res["pull_errors"] = read["errors"][:10]
            except Exception as exc:  # noqa: BLE001 - reported as a check that could not run
                res["error"] = f"read from {b}: {type(exc).__name__}: {exc}"
        log(f"replica {b}: " + json.dumps({k: v for k, v in res.items() if k != "queues"}), t0, quiet)
        out[b] = res
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=3, choices=(2, 3))
    ap.add_argument("--duration", type=float, default=300, help="seconds of faults")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--faults", default=",".join(KINDS), help="comma-separated kinds: " + ", ".join(KINDS))
    ap.add_argument("--controllers", type=int, default=1, choices=(1, 3))
    ap.add_argument("--short", action="store_true", help="about a minute: 45 s of faults")
    ap.add_argument("--quick", action="store_true", help="--short with a fixed seed (the benchmarks' quick mode)")
    ap.add_argument("--keep", action="store_true", help="keep stores and logs (their directory is printed)")
    ap.add_argument("--all-ack", default="true", choices=("true", "false"))
    ap.add_argument("--scenario", choices=("random", "isolate-master"), default="random",
                    help="isolate-master: one deterministic cut of the master from controller and replicas")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    kinds = [k.strip() for k in args.faults.split(",") if k.strip()]
    if bad := [k for k in kinds if k not in KINDS]:
        ap.error(f"unknown fault kind {', '.join(bad)}; the kinds: {', '.join(KINDS)}")
    short = args.short or args.quick
    duration = 45.0 if short else args.duration
    if args.seed is not None:
        seed = args.seed
    else:                       # --quick is a check that the harness runs: the same faults every time
        seed = QUICK_SEED if args.quick else random.SystemRandom().randrange(1 << 31)
    why = netns.unavailable()
    if why:
        print(json.dumps({"skipped": f"chaos needs root, ip, tc and network namespaces: {why}"}))
        sys.exit(0 if args.quick else 2)
    result = run(args, kinds, duration, seed, SETTLE_S / 2 if short else SETTLE_S)
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps({k: v for k, v in result.items() if k not in ("faults", "replicas_read")}, indent=1))
    sys.exit(1 if result["failures"] else 0)


def run(args, kinds: list[str], duration: float, seed: int, settle: float) -> dict:
    rng = random.Random(seed)
    quiet = False
    tmp = Path(tempfile.mkdtemp(prefix="mqtool-chaos-"))
    g = ChaosGroup(tmp, args.replicas, args.controllers, args.all_ack == "true")
    net = netns.Network()
    t0 = time.monotonic()
    mon = load = None
    old_term = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)     # even if started with it ignored
    result: dict = {"seed": seed, "replicas": args.replicas, "controllers": args.controllers,
                    "all_ack": args.all_ack == "true", "scenario": args.scenario, "dir": str(tmp)}
    try:
        net.open(g.host_names)
        g.plan(net)
        log(f"hosts {', '.join(f'{n}={h.ip}' for n, h in net.hosts.items())}; files in {tmp}; seed {seed}", t0, quiet)
        for name in ["ns", *(h for h in g.host_names if h.startswith("c"))]:
            g.start(name)
        for b in g.brokers:
            g.start(b)
        mon = Monitor(g, t0)
        mon.thread.start()
        if not wait_for("a full SyncStateSet", lambda: g.full(mon.last()), 90):
            raise RuntimeError(f"the group never had a full SyncStateSet: {mon.last()}")
        asyncio.run(create_topic(g.ns_addr))
        load = Load(g.ns_addr, t0)
        load.thread.start()
        warm = time.monotonic()
        wait_for("steady sends", lambda: len(load.acked) >= 100, 60)
        result["baseline"] = {"acked": len(load.acked), "seconds": round(time.monotonic() - warm, 3),
                              "longest_gap": load.longest_gap()}
        faults = Faults(g, net, rng)
        records = []
        if args.scenario == "isolate-master":
            records.append(run_fault("isolate-master", ISOLATE_HOLD_S, faults, mon, load, t0, quiet, settle))
        else:
            end = time.monotonic() + duration
            while time.monotonic() < end:
                kind = rng.choice(kinds)
                records.append(run_fault(kind, rng.uniform(*HOLD_S[kind]), faults, mon, load, t0, quiet, settle))
                time.sleep(rng.uniform(*GAP_S))
        wait_for("sends after the last fault", lambda: load.gaps and load.gaps[-1][1] > time.monotonic() - t0 - 1, 30)
        load.stop.set()
        load.thread.join(30)
        result |= {"faults": records, "acked": len(load.acked), "send_failures": load.failed,
                   "longest_gap": load.longest_gap()}
        log(f"producer stopped: {len(load.acked)} acknowledged, {load.failed} failed", t0, quiet)
        result["replicas_read"] = check_replicas(g, load, t0, quiet, settle)
        mon.stop.set()
        stops = {b: g.stop(b) for b in g.brokers}
        stops |= {h: g.stop(h) for h in g.host_names if h not in g.brokers}
        result["stops"] = stops
        stores = {b: g.procs[b].store for b in g.brokers}
        result["verify"] = {b: chaoscheck.store_verify(s, g.procs[b].log) for b, s in stores.items()}
        result["commit_logs"] = chaoscheck.compare_commit_logs(stores)
        result["tracebacks"] = chaoscheck.tracebacks({n: p.log for n, p in g.procs.items()})
    except BaseException as exc:  # noqa: BLE001 - Ctrl-C and SystemExit too: reported, then cleaned up
        result["error"] = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, KeyboardInterrupt):
            result["error"] = "interrupted"
    finally:
        if load is not None:
            load.stop.set()
        if mon is not None:
            mon.stop.set()
        g.kill_all()
        net.close()
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    result["failures"] = failures(result)
    result["summary"] = summary(result)
    return result


async def create_topic(ns: str) -> None:
    admin = Admin(ns)
    try:
        await admin.create_topic(TOPIC, QUEUES, QUEUES)
    finally:
        await admin.close()


def failures(r: dict) -> list[str]:
    out = []
    if "error" in r:
        out.append(f"the run stopped: {r['error']}")
    for b, res in (r.get("replicas_read") or {}).items():
        if res.get("error"):
            out.append(f"{b}: could not check: {res['error']}")
        if res.get("missing"):
            out.append(f"{b}: {res['missing']} acknowledged messages missing (first {res['missing_keys'][:5]})")
        if res.get("duplicates"):
            out.append(f"{b}: {res['duplicates']} keys read more than once (first {res['duplicate_keys'][:5]})")
    for b, v in (r.get("verify") or {}).items():
        if not v["clean"]:
            h = v.get("cq_holes")
            holes = (f"; {h['records']} records without a consume queue unit: "
                     f"{h['last_before_an_epoch_start']} the last before an epoch start, "
                     f"{h['at_a_restarts_confirm_offset']} the first above a restart's confirmOffset, "
                     f"{len(h['elsewhere'])} elsewhere" if h else "")
            out.append(f"{b}: store verify exit {v['exit']}: problems {v['problems']}{holes}, first: "
                       f"{v['first_problems'][:3]} {v.get('stderr', '')}")
    for d in (r.get("commit_logs") or {}).get("differ", []):
        out.append(f"commit logs of {d['replicas'][0]} and {d['replicas'][1]} differ at byte {d['first_byte']} "
                   f"(common length {d['common_length']})")
    out += derived_counts_differ(r)
    for name, lines in (r.get("tracebacks") or {}).items():
        out.append(f"{name} log: {len(lines)} traceback(s), first: {lines[0]}")
    return out


def derived_counts_differ(r: dict) -> list[str]:
    """Replicas whose commit logs are the same length hold the same records, so their consume queue
    units and index entries must be as many too (a record dispatched twice shows here)."""
    lengths = (r.get("commit_logs") or {}).get("lengths") or {}
    out = []
    for field in ("queue_units", "index_entries"):
        by_length: dict[int, dict[str, int]] = {}
        for b, v in (r.get("verify") or {}).items():
            if field in v and b in lengths:
                by_length.setdefault(lengths[b], {})[b] = v[field]
        for length, counts in by_length.items():
            if len(set(counts.values())) > 1:
                out.append(f"{field.replace('_', ' ')} differ between replicas with the same commit log "
                           f"({length} bytes): {counts}")
    return out


def summary(r: dict) -> dict:
    faults = r.get("faults") or []
    read = r.get("replicas_read") or {}
    return {"acked": r.get("acked"), "missing": {b: x.get("missing") for b, x in read.items()},
            "duplicates": {b: x.get("duplicates") for b, x in read.items()},
            "new_master_s": [(f["kind"], f["new_master_s"]) for f in faults],
            "full_sync_state_set_s": [(f["kind"], f["full_sync_state_set_s"]) for f in faults],
            "longest_gap_s": (r.get("longest_gap") or {}).get("s"),
            "verify_clean": {b: v["clean"] for b, v in (r.get("verify") or {}).items()},
            "failures": len(r.get("failures") or [])}


if __name__ == "__main__":
    main()
