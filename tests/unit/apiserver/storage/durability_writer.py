"""Child process for test_sqlite_durability: writes forever, printing each acknowledged write.

Usage: python durability_writer.py DB_PATH {create|churn}. Each line printed is
``<op> <key> <revision>`` and is printed only after the store acknowledged the write.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import sys

from apiserver.storage import interface, sqlite

_PAD = "x" * 65_536  # big values, so a kill is likely to land in the middle of writing one


def value(key: str, n: int) -> bytes:
    return json.dumps({"key": key, "n": n, "pad": _PAD}).encode()


def ack(op: str, record: interface.Record) -> None:
    sys.stdout.write(f"{op} {record.key} {record.revision}\n")
    sys.stdout.flush()


async def create_forever(store: sqlite.Store) -> None:
    n = 0
    while True:
        key = f"/d/{n:06}"
        ack("put", await store.create(key, value(key, n)))
        n += 1


async def churn_forever(store: sqlite.Store) -> None:
    # Ten keys updated, deleted and recreated in turn, with a tiny history: compaction keeps
    # running while the process is killed. A restarted writer carries on from what is stored.
    records = {f"/d/{i}": await store.get(f"/d/{i}") for i in range(10)}
    n = 0
    while True:
        for key, record in records.items():
            n += 1
            if record is None:
                written = await store.create(key, value(key, n))
            elif n % 3 == 0:
                ack("del", await store.delete(key, expected_revision=record.revision))
                records[key] = None
                continue
            else:
                written = await store.update(key, value(key, n), expected_revision=record.revision)
            records[key] = written
            ack("put", written)


async def main(path: pathlib.Path, mode: str) -> None:
    store = sqlite.Store(path, history=5 if mode == "churn" else 10_000)
    await store.start()
    print("ready", flush=True)
    await (churn_forever(store) if mode == "churn" else create_forever(store))


if __name__ == "__main__":
    asyncio.run(main(pathlib.Path(sys.argv[1]), sys.argv[2]))
