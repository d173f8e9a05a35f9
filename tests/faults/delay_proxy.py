#!/usr/bin/env python3
"""tests/faults/delay_proxy.py -- a TCP proxy on loopback that delays traffic.

Forwards every connection made to --listen to --target. Each chunk read from
one side is written to the other after the delay in force when it was read,
in order. The delays are read from the control file (two numbers: server-to-
client ms, client-to-server ms), re-read whenever it changes (write it to a
temporary file and rename it over the control file), so the fault harness can
delay replies past a lease's ttl and take the delay away again.

Usage: delay_proxy.py --listen PORT --target PORT --control FILE
"""

import argparse
import asyncio
import os
import signal


class Control:
    def __init__(self, path):
        self.path = path
        self.mtime = None
        self.down_ms = 0  # server -> client
        self.up_ms = 0    # client -> server

    def refresh(self):
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.down_ms = self.up_ms = 0
            return
        # Writers replace the file by rename, so a new inode means new content.
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self.mtime:
            return
        self.mtime = stamp
        try:
            with open(self.path, encoding="ascii") as f:
                parts = f.read().split()
            self.down_ms = int(parts[0]) if parts else 0
            self.up_ms = int(parts[1]) if len(parts) > 1 else 0
        except (OSError, ValueError):
            pass


async def pump(reader, writer, control, downstream):
    """Copies reader to writer, each chunk after its delay, preserving order."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def deliver():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(deliver())
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            control.refresh()
            delay = control.down_ms if downstream else control.up_ms
            queue.put_nowait((loop.time() + delay / 1000.0, data))
    except (ConnectionError, OSError):
        pass
    queue.put_nowait((0, None))
    try:
        await sender
    except (ConnectionError, OSError):
        pass
    try:
        writer.close()
    except (ConnectionError, OSError):
        pass


async def serve(args):
    control = Control(args.control)

    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", args.target)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            pump(client_reader, server_writer, control, downstream=False),
            pump(server_reader, client_writer, control, downstream=True))

    server = await asyncio.start_server(handle, "127.0.0.1", args.listen)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--target", type=int, required=True)
    ap.add_argument("--control", required=True)
    asyncio.run(serve(ap.parse_args()))


if __name__ == "__main__":
    main()
