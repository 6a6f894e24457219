package dev.detour.rmqdriver;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.java.impl.producer.SendReceiptImpl;

/**
 * Sends with RocketMQ 5's gRPC SDK (rocketmq-client-java) on the paced schedule the fault benchmark
 * gives every producer, and prints one JSON line per send in the shape of Produce.java's, so the
 * same Go code reads both. The producer keeps the SDK's defaults (TLS on, three attempts, 3 s per
 * request) but the endpoint.
 *
 * <pre>
 * GrpcPaced key=value ...
 *   endpoints=host:port   topic=T   senders=4   rate=200 (sends per second, all senders)
 *   durationMs=10000   size=128
 *   startAtMs=0 (epoch millis of the first slot; 0 = now; "stdin" = one line read from standard
 *                input after the ready line)
 *   warmup=0 (sends before the ready line, not recorded)
 *   shared=false (true: the senders share one schedule, slot i at t0 + i/rate, a sender that is
 *                 behind sends at once, nothing is issued later than graceMs after the end;
 *                 false: each sender keeps its own slots)
 *   graceMs=100
 * </pre>
 *
 * <p>A line is {"sender":0,"startMs":0,"latencyUs":0,"ok":true,"broker":"b","queueId":0,
 * "msgId":"...","brokers":["b"],"slot":0,"attempts":[],"error":"..."}. The SDK does not say which
 * brokers a send's attempts tried, so brokers holds only the broker of the queue the receipt names
 * (the one that stored the message) and attempts is empty.
 */
public final class GrpcPaced {
  private GrpcPaced() {}

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = Text.arguments(argv);
    String topic = a.get("topic");
    int senders = Math.max(1, Integer.parseInt(a.getOrDefault("senders", "4")));
    double rate = Double.parseDouble(a.getOrDefault("rate", "200"));
    long durationMs = Long.parseLong(a.getOrDefault("durationMs", "10000"));
    int size = Math.max(1, Integer.parseInt(a.getOrDefault("size", "128")));
    boolean shared = Boolean.parseBoolean(a.getOrDefault("shared", "false"));
    long graceMs = Long.parseLong(a.getOrDefault("graceMs", "100"));

    ClientServiceProvider provider = ClientServiceProvider.loadService();
    ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(a.get("endpoints")).build();
    Producer producer;
    try {
      producer = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build();
    } catch (Throwable e) {
      System.err.println("the producer did not start: " + Text.describe(e));
      System.exit(2);
      return;
    }
    byte[] body = new byte[size];
    for (int i = 0; i < size; i++) {
      body[i] = (byte) ('a' + i % 26);
    }
    Message m = provider.newMessageBuilder().setTopic(topic).setBody(body).build();
    int warmup = Integer.parseInt(a.getOrDefault("warmup", "0"));
    for (int i = 0; i < warmup; i++) {
      try {
        producer.send(provider.newMessageBuilder().setTopic(topic).setBody(new byte[] {'w'}).build());
      } catch (Throwable e) {
        System.err.println("warm-up send failed: " + Text.describe(e));
      }
    }
    PrintStream out = System.out;
    synchronized (out) {
      out.println("{\"ready\":true}");
      out.flush();
    }
    long t0 = startAt(a.getOrDefault("startAtMs", "0"));
    Schedule s = new Schedule(t0, durationMs, rate, senders, shared, graceMs);
    AtomicLong sends = new AtomicLong();
    CountDownLatch done = new CountDownLatch(senders);
    for (int i = 0; i < senders; i++) {
      int sender = i;
      Thread th = new Thread(() -> {
        try {
          sendOnSchedule(producer, m, s, sender, out, sends);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        } finally {
          done.countDown();
        }
      }, "sender-" + i);
      th.start();
    }
    done.await();
    synchronized (out) {
      out.println("{\"done\":true,\"sends\":" + sends.get() + "}");
      out.flush();
    }
    producer.close();
    System.exit(0);
  }

  /** startAt is the schedule's first slot: the argument, or a line of standard input for "stdin". */
  private static long startAt(String arg) throws Exception {
    long at;
    if (arg.equals("stdin")) {
      String line = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
      at = line == null ? 0 : Long.parseLong(line.trim());
    } else {
      at = Long.parseLong(arg);
    }
    return at > 0 ? at : System.currentTimeMillis();
  }

  /** The send slots of all senders: shared (one global sequence) or one sequence per sender. */
  private static final class Schedule {
    final long t0;
    final long end;
    final double rate;
    final int senders;
    final boolean shared;
    final long graceMs;
    final long scheduled;
    final AtomicLong next = new AtomicLong();

    Schedule(long t0, long durationMs, double rate, int senders, boolean shared, long graceMs) {
      this.t0 = t0;
      this.end = t0 + durationMs;
      this.rate = rate;
      this.senders = senders;
      this.shared = shared;
      this.graceMs = graceMs;
      this.scheduled = (long) Math.floor(durationMs / 1000.0 * rate);
    }

    /** slot returns {index, epoch millis} of a sender's k-th send, or null once it has no more. */
    long[] slot(int sender, long k) {
      if (shared) {
        long index = next.getAndIncrement();
        if (index >= scheduled) {
          return null;
        }
        return new long[] {index, t0 + (long) Math.floor(index * 1000.0 / rate)};
      }
      long at = t0 + (long) ((k + (double) sender / senders) * (senders * 1000.0 / rate));
      return at >= end ? null : new long[] {k, at};
    }
  }

  /** sendOnSchedule makes one sender's sends, each at its slot, and prints each one's line. */
  private static void sendOnSchedule(Producer producer, Message m, Schedule s, int sender, PrintStream out,
      AtomicLong sends) throws InterruptedException {
    StringBuilder b = new StringBuilder(256);
    for (long k = 0; ; k++) {
      long[] slot = s.slot(sender, k);
      if (slot == null) {
        return;
      }
      long wait = slot[1] - System.currentTimeMillis();
      if (wait > 0) {
        Thread.sleep(wait);
      }
      if (s.shared && System.currentTimeMillis() >= s.end + s.graceMs) {
        return;
      }
      long startMs = System.currentTimeMillis();
      long startNs = System.nanoTime();
      SendReceipt r = null;
      String error = null;
      try {
        r = producer.send(m);
      } catch (Throwable e) {
        error = Text.describe(e);
      }
      long latencyUs = (System.nanoTime() - startNs) / 1000;
      b.setLength(0);
      b.append("{\"sender\":").append(sender).append(",\"startMs\":").append(startMs)
          .append(",\"latencyUs\":").append(latencyUs).append(",\"ok\":").append(r != null)
          .append(",\"slot\":").append(slot[0]).append(",\"attempts\":[]");
      appendReceipt(b, r);
      if (error != null) {
        b.append(",\"error\":").append(Text.quote(error));
      }
      b.append('}');
      synchronized (out) {
        out.println(b);
      }
      sends.incrementAndGet();
    }
  }

  /**
   * appendReceipt adds the receipt's message id and the broker and queue it names. The broker is
   * the queue's as the route the SDK was given names it, which a tenant-scoped route prefixes: the
   * last path element is the broker's own name.
   */
  private static void appendReceipt(StringBuilder b, SendReceipt r) {
    if (r == null) {
      b.append(",\"brokers\":[]");
      return;
    }
    b.append(",\"msgId\":").append(Text.quote(r.getMessageId().toString()));
    if (!(r instanceof SendReceiptImpl)) {
      b.append(",\"brokers\":[]");
      return;
    }
    SendReceiptImpl ri = (SendReceiptImpl) r;
    String broker = ri.getMessageQueue().getBroker().getName();
    broker = broker.substring(broker.lastIndexOf('/') + 1);
    b.append(",\"broker\":").append(Text.quote(broker)).append(",\"queueId\":").append(ri.getMessageQueue().getQueueId())
        .append(",\"brokers\":[").append(Text.quote(broker)).append(']');
  }
}
