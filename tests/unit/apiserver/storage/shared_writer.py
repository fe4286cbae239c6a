"""Child process for test_sqlite_shared: a ``--workers`` peer that writes through its own shared
store and prints each write once it is acknowledged.

Usage: python shared_writer.py DB_PATH COUNT. Prints ``ready``, then for each of COUNT writes
``<op> <key> <revision>`` (creates of ``/w/<n>`` with every third one updated), then waits for
its stdin to close.
"""

from __future__ import annotations

import asyncio
import pathlib
import sys

from apiserver.storage import interface, sqlite


def ack(op: str, record: interface.Record) -> None:
    sys.stdout.write(f"{op} {record.key} {record.revision}\n")
    sys.stdout.flush()


async def main(path: pathlib.Path, count: int) -> None:
    store = sqlite.Store(path, shared=True)
    await store.start()
    try:
        print("ready", flush=True)
        for n in range(count):
            created = await store.create(f"/w/{n:04}", f"v{n}".encode())
            ack("create", created)
            if n % 3 == 0:
                ack("update", await store.update(created.key, b"again",
                                                 expected_revision=created.revision))
        print("done", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(pathlib.Path(sys.argv[1]), int(sys.argv[2])))
