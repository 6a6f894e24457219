"""Reads messages back with RocketMQ's Python gRPC client (rocketmq-python-client).

Several readers run in one process, each a SimpleConsumer or a PushConsumer with the client's
defaults (plaintext) except its endpoint, group and subscription. For every message a reader gets
it prints one JSON line with what the application sees, the body as its length and SHA-256, and
the body_encoding the message carried on the wire (read where the client decodes the message):

  {"reader":"...","kind":"received","msgId":"...","topic":"...","tag":"...","keys":["..."],
   "props":{"k":"v"},"bodyLen":1,"bodySha256":"...","encoding":"IDENTITY|GZIP","error":""}

and one line {"reader":"...","kind":"start|receive|ack","error":"..."} for a consumer that cannot
start, a failed receive or a failed ack.

Arguments (key=value): topics (comma-separated, every reader subscribes to all), count (each reader
stops once it has read this many messages), timeoutMs (every reader stops after this long in any
case), reader.N (N = 0, 1, ...: name,simple|push,host:port,group).
"""

import hashlib
import json
import os
import sys
import threading
import time

from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression,
                      Message, MessageListener, PushConsumer, SimpleConsumer)
from rocketmq.grpc_protocol import Encoding

from grpc_produce import describe, parse

_print_lock = threading.Lock()
_encodings = {}
_from_protobuf = Message.fromProtobuf


def _recording_from_protobuf(self, message):
    """The client's own decoding, after noting the body_encoding the message arrived with."""
    _encodings[message.system_properties.message_id] = Encoding.Name(message.system_properties.body_encoding)
    return _from_protobuf(self, message)


Message.fromProtobuf = _recording_from_protobuf


def emit(row):
    """Prints one result line whole and at once: readers run in threads of their own."""
    with _print_lock:
        print(json.dumps(row), flush=True)


def report(name, m):
    """Prints what the application sees of one message."""
    body = m.body or b""
    msg_id = str(m.message_id)
    emit({"reader": name, "kind": "received", "msgId": msg_id, "topic": m.topic, "tag": m.tag or "",
          "keys": list(m.keys or []), "props": dict(m.properties or {}), "bodyLen": len(body),
          "bodySha256": hashlib.sha256(body).hexdigest(), "encoding": _encodings.get(msg_id, ""),
          "error": ""})


class Counter(MessageListener):
    """A push reader's listener: reports each message and counts it."""

    def __init__(self, name):
        self.name = name
        self.lock = threading.Lock()
        self.read = 0

    def consume(self, message):
        report(self.name, message)
        with self.lock:
            self.read += 1
        return ConsumeResult.SUCCESS


def read(spec, topics, count, deadline):
    """Runs one reader (name, mode, endpoint, group) until it read count messages or deadline."""
    name, mode, endpoint, group = spec
    subscription = {t: FilterExpression() for t in topics}
    config = ClientConfiguration(endpoint, Credentials("", ""))
    try:
        if mode == "push":
            listener = Counter(name)
            consumer = PushConsumer(config, group, listener, subscription)
            consumer.startup()
            try:
                while listener.read < count and time.monotonic() < deadline:
                    time.sleep(0.1)
            finally:
                consumer.shutdown()
            return
        consumer = SimpleConsumer(config, group, subscription, await_duration=5)
        consumer.startup()
    except Exception as e:  # every failure is a result for the test to judge
        emit({"reader": name, "kind": "start", "error": describe(e)})
        return
    got = 0
    try:
        while got < count and time.monotonic() < deadline:
            try:
                msgs = consumer.receive(16, 30)
            except Exception as e:
                emit({"reader": name, "kind": "receive", "error": describe(e)})
                time.sleep(0.5)
                continue
            for m in msgs or []:
                report(name, m)
                got += 1
                try:
                    consumer.ack(m)
                except Exception as e:
                    emit({"reader": name, "kind": "ack", "error": describe(e)})
    finally:
        consumer.shutdown()


def main(argv):
    a = parse(argv)
    topics = a["topics"].split(",")
    count = int(a.get("count", "1"))
    deadline = time.monotonic() + int(a.get("timeoutMs", "60000")) / 1000
    threads = []
    i = 0
    while f"reader.{i}" in a:
        th = threading.Thread(target=read, args=(a[f"reader.{i}"].split(","), topics, count, deadline))
        th.start()
        threads.append(th)
        i += 1
    for th in threads:
        th.join()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # The client's scheduler and I/O threads must not hold the process after its work is done.
    os._exit(code)
