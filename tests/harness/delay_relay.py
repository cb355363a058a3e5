#!/usr/bin/env python3
"""tests/harness/delay_relay.py PORT DELAY_MS [MARK]

A transparent TCP relay for the namespace cluster (tests/harness/netns.sh
delay): the host's nftables rules redirect its TCP connections (both those
it accepts and those it makes, ssh excepted) to PORT; the relay connects
on to each connection's original destination (SO_ORIGINAL_DST) and
forwards the bytes both ways, each chunk held DELAY_MS after it arrived,
in order.  Its own connections carry the firewall mark MARK (default
0x4c7), which the rules let through.  Runs until killed.
"""
import asyncio
import socket
import struct
import sys

SO_ORIGINAL_DST = 80
SO_MARK = 36


def original_dst(sock):
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port = struct.unpack("!H", raw[2:4])[0]
    return socket.inet_ntoa(raw[4:8]), port


async def pump(reader, writer, delay):
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def feed():
        try:
            while True:
                data = await reader.read(1 << 16)
                queue.put_nowait((loop.time() + delay, data))
                if not data:
                    return
        except (ConnectionError, OSError):
            queue.put_nowait((loop.time(), None))

    feeder = asyncio.create_task(feed())
    try:
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if data is None:
                writer.transport.abort()
                return
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        return
    finally:
        feeder.cancel()


async def serve_one(reader, writer, delay, mark):
    sock = writer.get_extra_info("socket")
    try:
        host, port = original_dst(sock)
        out = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        out.setsockopt(socket.SOL_SOCKET, SO_MARK, mark)
        out.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        out.setblocking(False)
        await asyncio.wait_for(asyncio.get_running_loop().sock_connect(out, (host, port)), 10)
        oreader, owriter = await asyncio.open_connection(sock=out)
    except (OSError, asyncio.TimeoutError):
        writer.transport.abort()
        return
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    await asyncio.gather(pump(reader, owriter, delay), pump(oreader, writer, delay))
    writer.close()
    owriter.close()


async def main():
    port = int(sys.argv[1])
    delay = int(sys.argv[2]) / 1000.0
    mark = int(sys.argv[3], 0) if len(sys.argv) > 3 else 0x4C7
    server = await asyncio.start_server(
        lambda r, w: serve_one(r, w, delay, mark), "0.0.0.0", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
