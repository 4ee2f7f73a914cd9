#!/usr/bin/env python3
"""capture_proxy.py: a recording TCP proxy for Kafka's wire protocol, used to capture the golden frames.

It listens on 127.0.0.1 (a free port, or --port), forwards every connection to the upstream broker
(--upstream HOST:PORT, or --upstream-file FILE that holds HOST:PORT once the broker is up) and appends
every frame it sees, request or response, size prefix removed, as one JSON line to --log:

    {"conn": 3, "dir": "req"|"resp", "seq": 17, "key": 0, "ver": 9, "corr": 5, "client": "rdkafka",
     "hex": "00000009..."}

Responses carry the api key/version of the request they answer (matched by correlation id on the same
connection). The broker must advertise the proxy's address (advertised.listeners) so that clients come
back through it after Metadata. The proxy never changes a byte. Prints the listening port on stdout.
Read next: select_frames.py (picks the golden frames out of the log), capture.sh.
"""
import argparse
import json
import os
import socket
import struct
import sys
import threading
import time

lock = threading.Lock()
seq_counter = [0]


def log_frame(out, rec):
    with lock:
        seq_counter[0] += 1
        rec["seq"] = seq_counter[0]
        out.write(json.dumps(rec) + "\n")
        out.flush()


def read_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def pump(src, dst, conn_id, direction, pending, out):
    try:
        while True:
            head = read_exact(src, 4)
            if head is None:
                break
            (size,) = struct.unpack(">i", head)
            if size < 0 or size > 200 * 1024 * 1024:
                print(f"capture_proxy: conn {conn_id}: bad size {size}", file=sys.stderr)
                break
            frame = read_exact(src, size)
            if frame is None:
                break
            rec = {"conn": conn_id, "dir": direction, "hex": frame.hex()}
            if direction == "req" and len(frame) >= 8:
                key, ver, corr = struct.unpack(">hhi", frame[:8])
                client = None
                if len(frame) >= 10:
                    (clen,) = struct.unpack(">h", frame[8:10])
                    if clen >= 0:
                        client = frame[10:10 + clen].decode("utf-8", "replace")
                rec.update(key=key, ver=ver, corr=corr, client=client)
                with lock:
                    pending[corr] = (key, ver)
            elif direction == "resp" and len(frame) >= 4:
                (corr,) = struct.unpack(">i", frame[:4])
                with lock:
                    key, ver = pending.pop(corr, (None, None))
                rec.update(key=key, ver=ver, corr=corr)
            log_frame(out, rec)
            dst.sendall(head + frame)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def upstream_addr(args):
    if args.upstream:
        text = args.upstream
    else:
        deadline = time.time() + 120
        while not (os.path.exists(args.upstream_file) and open(args.upstream_file).read().strip()):
            if time.time() > deadline:
                raise SystemExit("capture_proxy: no upstream address in " + args.upstream_file)
            time.sleep(0.2)
        text = open(args.upstream_file).read().strip()
    host, port = text.rsplit(":", 1)
    return host, int(port)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--upstream")
    ap.add_argument("--upstream-file")
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", help="also write the listening port here")
    args = ap.parse_args()
    if not args.upstream and not args.upstream_file:
        ap.error("need --upstream or --upstream-file")
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", args.port))
    srv.listen(64)
    port = srv.getsockname()[1]
    print(port, flush=True)
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(f"{port}\n")
        os.rename(args.port_file + ".tmp", args.port_file)
    out = open(args.log, "a")
    conn_id = 0
    while True:
        cli, _ = srv.accept()
        conn_id += 1
        try:
            up = socket.create_connection(upstream_addr(args))
        except OSError as e:
            print(f"capture_proxy: upstream: {e}", file=sys.stderr)
            cli.close()
            continue
        for s in (cli, up):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pending = {}
        threading.Thread(target=pump, args=(cli, up, conn_id, "req", pending, out), daemon=True).start()
        threading.Thread(target=pump, args=(up, cli, conn_id, "resp", pending, out), daemon=True).start()


if __name__ == "__main__":
    main()
