# SPDX-License-Identifier: BSD-2-Clause
"""Publish three prices and read them back through a pattern subscription,
in one process over shm (the README's example)."""
import flit

with flit.Context(transports="shm") as ctx:
    sub = ctx.subscribe("prices.*")                 # no callback: a queue
    pub = ctx.publisher("prices.eur")
    pub.wait_receivers(1)                           # discovery is asynchronous
    for price in (b"1.0842", b"1.0843", b"1.0841"):
        pub.send(price)                             # flit.OK, or a Status: retry
    for msg in sub.iter(timeout=0.5):               # polls the context
        if msg.kind == flit.DATA:
            print(msg.topic, msg.seq, msg.payload.decode())
        else:
            print(msg.topic, msg.kind.name, msg.source)
    print(ctx.counters()["msgs_received"], "received")
