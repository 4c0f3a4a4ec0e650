"""Subprocess for the crash tests: appends numbered messages and prints an ack line after each put."""
import sys

from mqtool_store.messagestore import Message, MessageStore
from mqtool_store.storeconfig import MessageStoreConfig


def main() -> None:
    root, mode, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cfg = MessageStoreConfig(storePathRootDir=root, flushDiskType=mode, mappedFileSizeCommitLog=256 * 1024,
                             mappedFileSizeConsumeQueue=2000, maxHashSlotNum=100, maxIndexNum=400,
                             flushIntervalConsumeQueue=50, flushIntervalCommitLog=20)
    store = MessageStore(cfg).start()
    print("ready", flush=True)
    i = start
    while True:
        body = (b"crash-test message %d " % i) * (1 + i % 7)
        r = store.put(Message("CrashTopic", i % 3, body, {"KEYS": f"c-{i}", "TAGS": f"T{i % 2}", "seq": str(i)}))
        if r.ok:
            print(f"ack {i} {r.offset}", flush=True)
        i += 1


if __name__ == "__main__":
    main()
