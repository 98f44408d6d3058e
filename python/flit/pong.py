# SPDX-License-Identifier: BSD-2-Clause
"""python -m flit.pong: ping-pong latency from Python, wire-compatible with
the C tool flit-pong (tools/flit-pong.c), so that either side can be C.

The ping publishes on "<prefix>.ping" and subscribes to "<prefix>.pong"; the
pong republishes every ping payload on "<prefix>.pong" from inside its
callback.  Payload: a sequence number in the first 8 bytes (native byte
order, as flit-pong), then filler; sequence numbers with the top bit set are
control messages: HELLO (start-up, every millisecond until one is echoed)
and BYE (all ones: the pong echoes it and exits).  One sample = (arrival of
the reply - send) / 2, both read by the ping with time.perf_counter_ns()
(CLOCK_MONOTONIC): t0 just before Publisher.send(), t1 in the callback that
delivers the reply.  Both sides publish unbatched on a receiver-paced shm
ring and spin (Context.poll in a loop, never sleeping).

  flit-pong --role pong -p P --cpus 1 &  python -m flit.pong --role ping -p P --cpu 0
  python -m flit.pong --role pong -p P --cpu 1 &  flit-pong --role ping -p P --cpus 0
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import flit

SEQ_CTL = 1 << 63
SEQ_HELLO = SEQ_CTL
SEQ_BYE = (1 << 64) - 1
_seq = struct.Struct("=Q")


def _payload(seq, size):
    head = _seq.pack(seq)
    fill = bytes((seq + i) & 0xff for i in range(8, size)) if size > 8 else b""
    return head + fill


def _open(args, sub_topic, pub_topic, on_msg):
    ctx = flit.Context(transports="shm", config=args.config)
    sub = ctx.subscribe(sub_topic, on_msg, pattern=False)
    pub = ctx.publisher(pub_topic, transport="shm",
                        config="batch = false\nshm.mode = paced\n")
    if args.size > pub.max_msg:
        raise SystemExit("flit.pong: size %d is larger than the source's largest message (%d)"
                         % (args.size, pub.max_msg))
    return ctx, sub, pub


def run_pong(args):
    st = {"bye": False, "gone": False, "echoed": 0}
    pub = None

    def on_msg(m):
        if m.kind == flit.EOS:
            st["gone"] = True
            return
        if m.kind != flit.DATA:
            return
        p = m.payload
        while pub.send(p) != 0:     # back-pressure is brief: the ping reads while it waits
            pass
        st["echoed"] += 1
        if len(p) >= 8 and _seq.unpack_from(p)[0] == SEQ_BYE:
            st["bye"] = True

    ctx, sub, pub = _open(args, args.prefix + ".ping", args.prefix + ".pong", on_msg)
    poll = ctx.poll
    idle_since = time.monotonic()
    spins = 0
    try:
        while not st["bye"] and not st["gone"]:
            if poll(0):
                spins = 0
                continue
            spins += 1
            if spins & 0x3ff == 0:
                now = time.monotonic()
                if spins == 0x400:
                    idle_since = now
                elif now - idle_since > args.timeout:
                    raise SystemExit("flit.pong: no message on '%s.ping' for %g s"
                                     % (args.prefix, args.timeout))
        pub.flush()
    finally:
        ctx.close()
    if not st["bye"]:
        raise SystemExit("flit.pong: the ping side's source ended before saying bye")
    return 0


def _stats(samples):
    s = sorted(samples)
    n = len(s)

    def pct(p):                     # nearest rank
        return s[min(n - 1, max(0, math.ceil(p / 100.0 * n) - 1))]
    avg = sum(s) / n
    sd = math.sqrt(sum((x - avg) ** 2 for x in s) / n)
    return {"min_ns": s[0], "avg_ns": int(round(avg)), "p50_ns": pct(50),
            "p99_ns": pct(99), "p999_ns": pct(99.9), "max_ns": s[-1],
            "stddev_ns": int(round(sd))}


def run_ping(args):
    st = {"expect": -1, "t1": 0, "got": False, "hello": False, "bye": False,
          "gone": False, "bad": None}
    now = time.perf_counter_ns

    def on_msg(m):
        if m.kind == flit.EOS:
            st["gone"] = True
            return
        if m.kind != flit.DATA:
            return
        p = m.payload
        seq = _seq.unpack_from(p)[0] if len(p) >= 8 else -2
        if seq == st["expect"]:
            st["t1"] = now()            # the reply is here: stop the clock
            st["got"] = True
            if p != st["sent"]:
                st["bad"] = "reply %d differs from what was sent (%d bytes, %d expected)" % (
                    seq, len(p), len(st["sent"]))
        elif seq == SEQ_BYE:
            st["bye"] = True
        elif seq >= 0 and seq & SEQ_CTL:
            st["hello"] = True

    ctx, sub, pub = _open(args, args.prefix + ".pong", args.prefix + ".ping", on_msg)
    poll, send = ctx.poll, pub.send
    try:
        # start-up: hello every millisecond until one comes back
        t_end = time.monotonic() + args.timeout
        k = 0
        nxt = 0.0
        while not st["hello"]:
            t = time.monotonic()
            if t >= nxt:
                send(_payload(SEQ_HELLO | k, args.size))
                k += 1
                nxt = t + 0.001
                if t > t_end:
                    raise SystemExit("flit.pong: start-up: no answer within %g s (is a pong "
                                     "running with prefix '%s'?)" % (args.timeout, args.prefix))
            poll(0)
        samples = []
        total = args.warmup + args.count
        payloads = [_payload(i, args.size) for i in range(min(total, 1024))]
        for i in range(total):
            buf = payloads[i % len(payloads)] if i < len(payloads) else \
                _seq.pack(i) + payloads[i % len(payloads)][8:]
            st["expect"] = i
            st["sent"] = buf
            st["got"] = False
            t_limit = None
            t0 = now()
            while send(buf) != 0:
                pass
            while not st["got"]:
                poll(1)
                if st["gone"]:
                    raise SystemExit("flit.pong: the pong side's source ended")
                if t_limit is None:
                    t_limit = t0 + int(args.timeout * 1e9)
                elif now() > t_limit:
                    raise SystemExit("flit.pong: round trip %d: no answer within %g s" % (i, args.timeout))
            if st["bad"]:
                raise SystemExit("flit.pong: bad reply: " + st["bad"])
            if i >= args.warmup:
                samples.append((st["t1"] - t0) / 2.0)
        # bye, and its echo (bounded)
        send(_payload(SEQ_BYE, args.size), timeout=args.timeout)
        pub.flush()
        ctx.wait(lambda: st["bye"] or st["gone"], args.timeout)
    finally:
        ctx.close()

    res = {"tool": "flit.pong", "transport": "shm", "size": args.size,
           "count": args.count}
    res.update(_stats(samples))
    res["clock"] = "perf_counter_ns"
    res["mode"] = "shm,paced,unbatched,spin,pinned=%s,python" % (
        args.cpu if args.cpu is not None else "no")
    if args.json:
        print(json.dumps(res))
    else:
        print("# shm ping-pong from Python (%s), %d-byte messages, %s; RTT/2 in ns; clock %s"
              % (sys.implementation.name, args.size, res["mode"], res["clock"]))
        keys = ("min_ns", "avg_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns", "stddev_ns")
        print("%-8s %6s %8s " % ("path", "size", "count") +
              " ".join("%8s" % k[:-3] for k in keys))
        print("%-8s %6d %8d " % ("python", args.size, args.count) +
              " ".join("%8d" % res[k] for k in keys))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m flit.pong",
        description="Ping-pong latency over shm from Python; speaks flit-pong's protocol, "
                    "so either side may be the C tool (flit-pong --role ping|pong -p PREFIX).")
    ap.add_argument("-r", "--role", choices=("ping", "pong"), default="pong")
    ap.add_argument("-p", "--prefix", default="flit-pong",
                    help="topics PREFIX.ping and PREFIX.pong (default flit-pong, as flit-pong --role)")
    ap.add_argument("-s", "--size", type=int, default=16, help="message size, >= 8 (default 16)")
    ap.add_argument("-n", "--count", type=int, default=100000, help="measured round trips")
    ap.add_argument("-w", "--warmup", type=int, default=10000, help="unmeasured round trips first")
    ap.add_argument("-c", "--cpu", type=int, default=None, help="pin this process to CPU N")
    ap.add_argument("-T", "--timeout", type=float, default=10.0,
                    help="give up when start-up, a round trip or silence lasts longer (s)")
    ap.add_argument("-C", "--config", action="append", default=[],
                    help="a config line for the context (repeatable)")
    ap.add_argument("-j", "--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args(argv)
    if args.size < 8:
        ap.error("size must be at least 8 bytes (the sequence number)")
    if args.count < 1 or args.warmup < 0:
        ap.error("count must be >= 1 and warmup >= 0")
    if args.cpu is not None:
        try:
            os.sched_setaffinity(0, {args.cpu})
        except OSError as e:
            ap.error("cannot pin to CPU %d: %s" % (args.cpu, e))
    try:
        return run_ping(args) if args.role == "ping" else run_pong(args)
    except flit.FlitError as e:
        print("flit.pong: %s" % e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
