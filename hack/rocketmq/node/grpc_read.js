'use strict';
/*
 * Reads messages back with RocketMQ's Node.js gRPC client (rocketmq-client-nodejs).
 *
 * Several readers run in one process, each a SimpleConsumer or a PushConsumer with the client's
 * defaults (plaintext) except its endpoint, group and subscription. For every message a reader
 * gets it prints one JSON line with what the application sees, the body as its length and
 * SHA-256:
 *
 *   {"reader":"...","kind":"received","msgId":"...","topic":"...","tag":"...","keys":["..."],
 *    "props":{"k":"v"},"bodyLen":1,"bodySha256":"...","error":""}
 *
 * and one line {"reader":"...","kind":"start|receive|ack","error":"..."} for a consumer that
 * cannot start, a failed receive or a failed ack. (The client decodes a whole receive at once: a
 * message it cannot decode fails the receive that brought it.)
 *
 * Arguments (key=value): topics (comma-separated, every reader subscribes to all), count (each
 * reader stops once it has read this many messages), timeoutMs (every reader stops after this
 * long in any case), reader.N (N = 0, 1, ...: name,simple|push,host:port,group).
 */

const crypto = require('node:crypto');
const { ConsumeResult, PushConsumer, SimpleConsumer } = require('rocketmq-client-nodejs');

/** Is the key=value arguments as an object, failing on any other shape. */
function parse(argv) {
  const args = {};
  for (const a of argv) {
    const eq = a.indexOf('=');
    if (eq < 0) {
      throw new Error(`argument ${a} is not key=value`);
    }
    args[a.slice(0, eq)] = a.slice(eq + 1);
  }
  return args;
}

function emit(row) {
  process.stdout.write(JSON.stringify(row) + '\n');
}

/** Names an error and its causes, bounded in size. */
function describe(e) {
  const parts = [];
  for (let c = e; c && parts.join(' <- ').length < 2000; c = c.cause) {
    parts.push(`${c.name || 'Error'}: ${c.message || String(c)}`);
  }
  return parts.join(' <- ');
}

function report(name, m) {
  const body = m.body || Buffer.alloc(0);
  emit({
    reader: name, kind: 'received', msgId: m.messageId, topic: m.topic, tag: m.tag || '',
    keys: m.keys || [], props: Object.fromEntries(m.properties || new Map()), bodyLen: body.length,
    bodySha256: crypto.createHash('sha256').update(body).digest('hex'), error: '',
  });
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

/** Runs one reader (name, mode, endpoint, group) until it read count messages or deadline. */
async function read([ name, mode, endpoint, group ], topics, count, deadline) {
  const subscriptions = new Map(topics.map(t => [ t, '*' ]));
  const base = { endpoints: endpoint, namespace: '', consumerGroup: group, subscriptions, sslEnabled: false };
  let got = 0;
  let consumer;
  try {
    if (mode === 'push') {
      consumer = new PushConsumer({ ...base, messageListener: { consume(m) {
        report(name, m);
        got++;
        return ConsumeResult.SUCCESS;
      } } });
    } else {
      consumer = new SimpleConsumer({ ...base, awaitDuration: 5000 });
    }
    await consumer.startup();
  } catch (e) {
    emit({ reader: name, kind: 'start', error: describe(e) });
    return;
  }
  try {
    while (got < count && Date.now() < deadline) {
      if (mode === 'push') {
        await sleep(100);
        continue;
      }
      got += await receive(name, consumer);
    }
  } finally {
    await consumer.shutdown().catch(e => process.stderr.write(`shutdown: ${describe(e)}\n`));
  }
}

/** One receive of a SimpleConsumer: every message printed and acked; how many it brought. */
async function receive(name, consumer) {
  let msgs;
  try {
    msgs = await consumer.receive(16, 30000);
  } catch (e) {
    emit({ reader: name, kind: 'receive', error: describe(e) });
    await sleep(500);
    return 0;
  }
  for (const m of msgs) {
    report(name, m);
    try {
      await consumer.ack(m);
    } catch (e) {
      emit({ reader: name, kind: 'ack', error: describe(e) });
    }
  }
  return msgs.length;
}

async function main() {
  const a = parse(process.argv.slice(2));
  const topics = a.topics.split(',');
  const count = Number(a.count || '1');
  const deadline = Date.now() + Number(a.timeoutMs || '60000');
  const readers = [];
  for (let i = 0; a[`reader.${i}`] !== undefined; i++) {
    readers.push(read(a[`reader.${i}`].split(','), topics, count, deadline));
  }
  await Promise.all(readers);
}

// The client's timers must not hold the process after its work is done.
main().then(() => process.exit(0), e => {
  process.stderr.write(`${describe(e)}\n`);
  process.exit(1);
});
