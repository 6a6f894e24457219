"""Sends messages with RocketMQ's Python gRPC client (rocketmq-python-client).

The producer keeps the client's defaults except its endpoint and, when asked with tls=true, TLS
(the client's default is plaintext). It prints one JSON line per send for the Go tests:

  {"kind":"normal|fifo|delay|commit|rollback|orphan-commit|orphan-rollback","index":0,"ok":true,
   "msgId":"...","body":"...","group":"","deliverAtMs":0,"sentMs":0,"error":""}

one line per check-back its TransactionChecker answers,

  {"checked":"kind","msgId":"...","body":"...","verdict":"COMMIT|ROLLBACK"}

and, when the producer cannot even start, one line {"kind":"start","ok":false,"error":"..."}.

Arguments (key=value): endpoints (host:port), topic, normal (count), fifo (count), groups (FIFO
message groups, the messages spread round-robin over them), delay (count), delayMs (how far in the
future each delayed message asks to be delivered), tag, pauseMs (a pause after the first half of
the normal messages, so that the producer's heartbeats and route refresh run mid-session), tls
(true or false), accessKey and secretKey (the client's Credentials, which sign every call; by
default both empty), commit and rollback (counts of transactional messages, each in its own
transaction, then committed or rolled back), orphanCommit and orphanRollback (counts of
transactional messages sent and never ended: the producer then stays until its checker has answered
a check-back for each, or maxMs has passed, and then graceMs, default 3000, in which the client
sends the ends). With any transactional count the producer has a TransactionChecker, which answers
COMMIT for the kinds commit and orphan-commit and ROLLBACK for any other. Every message carries the
user property detour-kind, its kind.

With TLS the client verifies the endpoint's certificate against gRPC's default roots, which
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH replaces.
"""

import json
import math
import os
import sys
import threading
import time

from rocketmq import (ClientConfiguration, Credentials, Message, Producer,
                      TransactionChecker, TransactionResolution)


def parse(argv):
    """Returns the key=value arguments as a dict, failing on any other shape."""
    args = {}
    for a in argv:
        key, eq, value = a.partition("=")
        if not eq:
            raise SystemExit(f"argument {a} is not key=value")
        args[key] = value
    return args


def emit(row):
    """Prints one result line at once, so a run cut short keeps what it did."""
    print(json.dumps(row), flush=True)


def describe(e):
    """Names an exception and its causes, bounded in size."""
    parts = []
    while e is not None and sum(map(len, parts)) < 2000:
        parts.append(f"{type(e).__name__}: {e}")
        e = e.__cause__ or e.__context__
    return " <- ".join(parts)


class KindChecker(TransactionChecker):
    """Answers a check-back by the message's kind, and remembers which orphans it answered."""

    def __init__(self):
        self.lock = threading.Lock()
        self.orphans = set()

    def check(self, message):
        kind = message.properties.get("detour-kind", "")
        verdict = TransactionResolution.COMMIT if kind in ("commit", "orphan-commit") else TransactionResolution.ROLLBACK
        with self.lock:
            if kind.startswith("orphan-"):
                self.orphans.add(str(message.message_id))
        emit({"checked": kind, "msgId": str(message.message_id), "body": message.body.decode(errors="replace"),
              "verdict": "COMMIT" if verdict == TransactionResolution.COMMIT else "ROLLBACK"})
        return verdict

    def answered(self):
        with self.lock:
            return len(self.orphans)


def send(producer, topic, tag, kind, index, nonce, group=None, deliver_at_s=0):
    """Sends one message and prints its result line."""
    body = f"grpc-{kind}-{index}-{nonce}"
    m = Message()
    m.topic = topic
    m.body = body.encode()
    m.tag = tag
    m.keys = body
    m.add_property("detour-kind", kind)
    if group is not None:
        m.message_group = group
    if deliver_at_s:
        # The client puts this value into the request's delivery timestamp as whole seconds.
        m.delivery_timestamp = deliver_at_s
    row = {"kind": kind, "index": index, "body": body, "group": group or "",
           "deliverAtMs": deliver_at_s * 1000, "sentMs": int(time.time() * 1000)}
    try:
        if kind in ("commit", "rollback") or kind.startswith("orphan-"):
            tx = producer.begin_transaction()
            receipt = producer.send(m, tx)
            if kind == "commit":
                tx.commit()
            elif kind == "rollback":
                tx.rollback()
            # an orphan is never ended: the broker checks back
        else:
            receipt = producer.send(m)
        row.update(ok=True, msgId=str(receipt.message_id), error="")
    except Exception as e:  # every failure is a result for the test to judge
        row.update(ok=False, msgId="", error=describe(e))
    emit(row)


def main(argv):
    a = parse(argv)
    topic = a["topic"]
    nonce = format(time.monotonic_ns(), "x")
    normal, fifo = int(a.get("normal", "0")), int(a.get("fifo", "0"))
    groups = max(1, int(a.get("groups", "1")))
    delay, delay_ms = int(a.get("delay", "0")), int(a.get("delayMs", "0"))
    tag = a.get("tag", "grpc")
    pause_ms = int(a.get("pauseMs", "0"))
    tls = a.get("tls", "false") == "true"
    commit, rollback = int(a.get("commit", "0")), int(a.get("rollback", "0"))
    orphan_commit, orphan_rollback = int(a.get("orphanCommit", "0")), int(a.get("orphanRollback", "0"))
    checker = KindChecker() if commit + rollback + orphan_commit + orphan_rollback > 0 else None

    try:
        credentials = Credentials(a.get("accessKey", ""), a.get("secretKey", ""))
        config = ClientConfiguration(a["endpoints"], credentials)
        producer = Producer(config, (topic,), checker=checker, tls_enable=tls)
        producer.startup()
    except Exception as e:
        emit({"kind": "start", "ok": False, "error": describe(e)})
        return 2
    try:
        for i in range(normal):
            if i == normal // 2 and pause_ms > 0:
                time.sleep(pause_ms / 1000)
            send(producer, topic, tag, "normal", i, nonce)
        for i in range(fifo):
            send(producer, topic, tag, "fifo", i, nonce, group=f"group-{i % groups}")
        for i in range(delay):
            # Rounded up: the message asks for no earlier than delayMs from now.
            send(producer, topic, tag, "delay", i, nonce,
                 deliver_at_s=math.ceil((time.time() * 1000 + delay_ms) / 1000))
        for kind, count in (("commit", commit), ("rollback", rollback),
                            ("orphan-commit", orphan_commit), ("orphan-rollback", orphan_rollback)):
            for i in range(count):
                send(producer, topic, tag, kind, i, nonce)
        if orphan_commit + orphan_rollback > 0:
            deadline = time.monotonic() + int(a.get("maxMs", "120000")) / 1000
            while checker.answered() < orphan_commit + orphan_rollback and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(int(a.get("graceMs", "3000")) / 1000)
    finally:
        try:
            producer.shutdown()
        except Exception as e:
            print(f"shutdown: {describe(e)}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # The client's scheduler and I/O threads must not hold the process after its work is done.
    os._exit(code)
