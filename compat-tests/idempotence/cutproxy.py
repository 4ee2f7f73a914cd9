#!/usr/bin/env python3
"""cutproxy.py: a TCP proxy for Kafka connections that cuts them at random points (test code only).

The broker under test is started with `advertised.listeners` naming this proxy's port, so every client
connection, the bootstrap one and those made after the Metadata redirect, passes through here. The proxy
reads the broker's real address from a file (the broker's `gregor.listener.file`, or Kafka's bootstrap
file) at each new connection, so a broker restarted on another port is followed.

It parses the Kafka framing (int32 size, then the request header: api_key int16, api_version int16,
correlation_id int32) in both directions, remembers which correlation ids are Produce requests (api key 0),
and for each Produce request draws (seeded random.Random) whether to cut the connection, and where:
  after_append  the request was forwarded whole; when its response comes back from the broker the proxy
                drops it and closes both sides. The broker has appended the batch, the client never hears
                so and must retry it: the case idempotence exists for.
  mid_request   forwards only part of the request frame, then closes (the broker sees a truncated frame).
  before_send   closes without forwarding the request at all.
  mid_response  forwards part of the response frame, then closes.
On SIGUSR1 the proxy starts holding back every Produce response (the connection stays open, the client
waits, the broker has appended); SIGUSR2 ends that. run.sh sends SIGUSR1 just before it kills the broker, so
batches the broker appended before its death are retried by the client against the restarted broker, which
must recognise them from the producer state it rebuilt.
Invariants: bytes are forwarded unchanged and in order until a cut; a cut closes both sockets; nothing is
cut before --warmup-s has passed (the client can fetch metadata and a producer id) nor after --stop-after
cuts. Connections to the broker that fail (broker down) close the client side at once.

Usage: cutproxy.py --upstream-file FILE --port-file FILE [--seed N] [--rate P] [--rate-file F] [--stats FILE]
Writes its listening address (127.0.0.1:PORT) to --port-file, prints the seed, and on SIGTERM or every
second writes counts to --stats as `key value` lines: connections, produce_requests, cuts_<kind>, cuts,
held_responses, upstream_refused.
Read next: run.sh (how the broker is pointed at the proxy), idem_client.c.
"""

import argparse
import asyncio
import os
import random
import signal
import struct
import sys
import time

PRODUCE = 0
KINDS = ("after_append", "mid_request", "before_send", "mid_response")


class Stats:
    def __init__(self):
        self.c = {"connections": 0, "produce_requests": 0, "upstream_refused": 0, "held_responses": 0}
        for k in KINDS:
            self.c["cuts_" + k] = 0

    def inc(self, k):
        self.c[k] = self.c.get(k, 0) + 1

    def write(self, path):
        if not path:
            return
        self.c["cuts"] = sum(self.c["cuts_" + k] for k in KINDS)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            for k, v in sorted(self.c.items()):
                f.write("%s %d\n" % (k, v))
        os.replace(tmp, path)


class Proxy:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.stats = Stats()
        self.t0 = time.monotonic()
        self.hold = False

    def upstream(self):
        try:
            addr = open(self.args.upstream_file).read().split()[0]
        except (OSError, IndexError):
            return None
        host, port = addr.rsplit(":", 1)
        return host, int(port)

    def may_cut(self):
        a = self.args
        return (time.monotonic() - self.t0 >= a.warmup_s and
                (a.stop_after <= 0 or sum(self.stats.c["cuts_" + k] for k in KINDS) < a.stop_after))

    def draw(self):
        """None, or the kind of cut for this Produce request."""
        r = self.rng.random()
        if not self.may_cut() or r >= self.args.rate:
            return None
        # after_append is the case that matters most: half the cuts.
        r2 = self.rng.random()
        if r2 < 0.5:
            return "after_append"
        return KINDS[1 + int((r2 - 0.5) / 0.5 * 3) % 3]

    async def handle(self, creader, cwriter):
        self.stats.inc("connections")
        up = self.upstream()
        try:
            if up is None:
                raise OSError("no upstream address")
            ureader, uwriter = await asyncio.open_connection(*up)
        except OSError:
            self.stats.inc("upstream_refused")
            cwriter.close()
            return
        conn = {"pending_cut": {}, "closed": False}

        def close_both():
            if not conn["closed"]:
                conn["closed"] = True
                for w in (cwriter, uwriter):
                    try:
                        w.transport.abort()
                    except Exception:
                        pass

        async def c2b():
            while True:
                hdr = await creader.readexactly(4)
                size = struct.unpack(">i", hdr)[0]
                if size < 0 or size > 200 * 1024 * 1024:
                    raise ConnectionError("bad frame size")
                body = await creader.readexactly(size)
                kind = None
                if size >= 8:
                    api_key, _ver, corr = struct.unpack(">hhi", body[:8])
                    if api_key == PRODUCE:
                        self.stats.inc("produce_requests")
                        kind = self.draw()
                        if kind == "before_send":
                            self.stats.inc("cuts_before_send")
                            close_both()
                            return
                        if kind == "mid_request":
                            self.stats.inc("cuts_mid_request")
                            cut_at = self.rng.randrange(1, 4 + size)
                            uwriter.write((hdr + body)[:cut_at])
                            await uwriter.drain()
                            close_both()
                            return
                        conn["pending_cut"][corr] = kind
                uwriter.write(hdr + body)
                await uwriter.drain()

        async def b2c():
            while True:
                hdr = await ureader.readexactly(4)
                size = struct.unpack(">i", hdr)[0]
                if size < 0 or size > 200 * 1024 * 1024:
                    raise ConnectionError("bad frame size")
                body = await ureader.readexactly(size)
                corr = struct.unpack(">i", body[:4])[0] if size >= 4 else None
                is_produce = corr in conn["pending_cut"]
                kind = conn["pending_cut"].pop(corr, None)
                if is_produce and self.hold:
                    self.stats.inc("held_responses")
                    continue
                if kind == "after_append":
                    self.stats.inc("cuts_after_append")
                    close_both()
                    return
                if kind == "mid_response":
                    self.stats.inc("cuts_mid_response")
                    cwriter.write((hdr + body)[:self.rng.randrange(1, 4 + size)])
                    await cwriter.drain()
                    close_both()
                    return
                cwriter.write(hdr + body)
                await cwriter.drain()

        tasks = [asyncio.ensure_future(c2b()), asyncio.ensure_future(b2c())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            close_both()

    async def stats_loop(self):
        while True:
            self.stats.write(self.args.stats)
            if self.args.rate_file:
                try:
                    self.args.rate = float(open(self.args.rate_file).read().split()[0])
                except (OSError, ValueError, IndexError):
                    pass
            await asyncio.sleep(1)

    async def main(self):
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        tmp = self.args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("127.0.0.1:%d\n" % port)
        os.replace(tmp, self.args.port_file)
        print("cutproxy: listening on 127.0.0.1:%d, seed %d, cut rate %.3f per Produce request"
              % (port, self.args.seed, self.args.rate), flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for s in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(s, stop.set)
        loop.add_signal_handler(signal.SIGUSR1, lambda: setattr(self, "hold", True))
        loop.add_signal_handler(signal.SIGUSR2, lambda: setattr(self, "hold", False))
        st = asyncio.ensure_future(self.stats_loop())
        await stop.wait()
        st.cancel()
        server.close()
        self.stats.write(self.args.stats)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upstream-file", required=True, help="file holding the broker's host:port")
    ap.add_argument("--port-file", required=True, help="the proxy writes 127.0.0.1:PORT here")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock, printed)")
    ap.add_argument("--rate", type=float, default=0.03, help="probability of a cut per Produce request")
    ap.add_argument("--rate-file", default="", help="file holding the rate, re-read every second")
    ap.add_argument("--warmup-s", type=float, default=0.0, help="no cuts during the first seconds")
    ap.add_argument("--stop-after", type=int, default=0, help="no more cuts after this many (0: no limit)")
    ap.add_argument("--stats", default="", help="file for the counters")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "big")
    asyncio.run(Proxy(args).main())


if __name__ == "__main__":
    sys.exit(main())
