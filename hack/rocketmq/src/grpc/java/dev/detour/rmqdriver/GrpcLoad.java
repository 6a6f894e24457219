package dev.detour.rmqdriver;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * Loads an access point with RocketMQ 5's gRPC SDK (rocketmq-client-java): one producer with the
 * SDK's defaults (TLS on, three attempts, 3 s per request) but the endpoint, and N sender threads
 * each calling the synchronous send in a loop. It runs two phases: a warm-up (warmupMs, so that
 * the SDK's session, the JIT and the server's connections are up) and the measured phase, which
 * ends after durationMs or, when count is above zero, once count sends were made, or when the
 * input says stop (or closes). With handshake=true the measured phase waits for a line "go" on
 * the input after the warm-up, so that the caller can sample the server's CPU exactly at its
 * start. It prints one JSON line per phase:
 *
 * <pre>{"phase":"warm","sent":0,"failed":0}
 * {"phase":"done","sent":0,"failed":0,"elapsedMs":0,"p50Us":0,"p90Us":0,"p99Us":0,"maxUs":0,"firstError":""}</pre>
 *
 * where sent counts successful sends, the percentiles are of successful sends' latency in
 * microseconds (nearest rank, monotonic clock) and elapsedMs is the measured phase's length.
 *
 * <p>Arguments (key=value): endpoints, topic, senders (default 1), warmupMs (default 0), durationMs
 * (default 5000), count (default 0: by duration), bodyBytes (default 1024), intervalMs (a pause
 * after each send of each sender, default 0), handshake (default false), tls (default true: the
 * SDK's default; false speaks plaintext gRPC).
 */
public final class GrpcLoad {
  private GrpcLoad() {}

  /** One sender's record of a phase: its latencies in nanoseconds, grown as needed. */
  private static final class Record {
    long[] took = new long[1024];
    int n;
    long failed;

    void add(long nanos) {
      if (n == took.length) {
        took = Arrays.copyOf(took, n * 2);
      }
      took[n++] = nanos;
    }
  }

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = Text.arguments(argv);
    String topic = a.get("topic");
    int senders = Math.max(1, Integer.parseInt(a.getOrDefault("senders", "1")));
    long warmupMs = Long.parseLong(a.getOrDefault("warmupMs", "0"));
    long durationMs = Long.parseLong(a.getOrDefault("durationMs", "5000"));
    long count = Long.parseLong(a.getOrDefault("count", "0"));
    int bodyBytes = Integer.parseInt(a.getOrDefault("bodyBytes", "1024"));
    long intervalMs = Long.parseLong(a.getOrDefault("intervalMs", "0"));
    boolean handshake = Boolean.parseBoolean(a.getOrDefault("handshake", "false"));
    boolean tls = Boolean.parseBoolean(a.getOrDefault("tls", "true"));

    ClientServiceProvider provider = ClientServiceProvider.loadService();
    ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(a.get("endpoints")).enableSsl(tls).build();
    Producer producer;
    try {
      producer = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build();
    } catch (Throwable e) {
      System.out.println("{\"phase\":\"start\",\"sent\":0,\"failed\":0,\"firstError\":" + Text.quote(e.toString()) + "}");
      System.out.flush();
      System.exit(2);
      return;
    }
    byte[] body = new byte[bodyBytes];
    Arrays.fill(body, (byte) 'x');
    Message m = provider.newMessageBuilder().setTopic(topic).setTag("load").setBody(body).build();

    AtomicBoolean stop = new AtomicBoolean();
    CountDownLatch go = new CountDownLatch(1);
    Thread input = new Thread(() -> readInput(go, stop), "input");
    input.setDaemon(true);
    input.start();

    AtomicReference<String> firstError = new AtomicReference<>("");
    if (warmupMs > 0) {
      Record[] warm = run(producer, m, senders, System.nanoTime() + warmupMs * 1_000_000L, 0, intervalMs,
          new AtomicBoolean(), firstError);
      System.out.println("{\"phase\":\"warm\",\"sent\":" + sent(warm) + ",\"failed\":" + failed(warm) + "}");
    } else {
      System.out.println("{\"phase\":\"warm\",\"sent\":0,\"failed\":0}");
    }
    System.out.flush();
    if (handshake) {
      go.await();
    }
    firstError.set("");
    long start = System.nanoTime();
    Record[] recs = run(producer, m, senders, start + durationMs * 1_000_000L, count, intervalMs, stop, firstError);
    long elapsed = System.nanoTime() - start;
    long[] all = new long[(int) sent(recs)];
    int k = 0;
    for (Record r : recs) {
      System.arraycopy(r.took, 0, all, k, r.n);
      k += r.n;
    }
    Arrays.sort(all);
    System.out.println("{\"phase\":\"done\",\"sent\":" + all.length + ",\"failed\":" + failed(recs)
        + ",\"elapsedMs\":" + elapsed / 1_000_000L + ",\"p50Us\":" + rank(all, 50) + ",\"p90Us\":" + rank(all, 90)
        + ",\"p99Us\":" + rank(all, 99) + ",\"maxUs\":" + (all.length == 0 ? 0 : all[all.length - 1] / 1000)
        + ",\"firstError\":" + Text.quote(firstError.get()) + "}");
    System.out.flush();
    producer.close();
    System.exit(0);
  }

  /** readInput releases the measured phase on "go" and ends it on "stop" or at the input's end. */
  private static void readInput(CountDownLatch go, AtomicBoolean stop) {
    try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
      for (String line; (line = in.readLine()) != null; ) {
        if (line.trim().equals("go")) {
          go.countDown();
        } else if (line.trim().equals("stop")) {
          break;
        }
      }
    } catch (Exception e) {
      // An unreadable input ends the run as its end does.
    }
    stop.set(true);
    go.countDown();
  }

  /** run sends from senders threads until the deadline, count sends in all, or stop. */
  private static Record[] run(Producer producer, Message m, int senders, long deadline, long count,
      long intervalMs, AtomicBoolean stop, AtomicReference<String> firstError) throws InterruptedException {
    Record[] recs = new Record[senders];
    Thread[] threads = new Thread[senders];
    AtomicLong left = new AtomicLong(count > 0 ? count : Long.MAX_VALUE);
    for (int i = 0; i < senders; i++) {
      Record r = new Record();
      recs[i] = r;
      threads[i] = new Thread(() -> {
        while (!stop.get() && System.nanoTime() < deadline && left.getAndDecrement() > 0) {
          long t0 = System.nanoTime();
          try {
            producer.send(m);
            r.add(System.nanoTime() - t0);
          } catch (Throwable e) {
            r.failed++;
            firstError.compareAndSet("", e.toString());
          }
          if (intervalMs > 0) {
            try {
              Thread.sleep(intervalMs);
            } catch (InterruptedException e) {
              return;
            }
          }
        }
      }, "sender-" + i);
      threads[i].start();
    }
    for (Thread t : threads) {
      t.join();
    }
    return recs;
  }

  private static long sent(Record[] recs) {
    long n = 0;
    for (Record r : recs) {
      n += r.n;
    }
    return n;
  }

  private static long failed(Record[] recs) {
    long n = 0;
    for (Record r : recs) {
      n += r.failed;
    }
    return n;
  }

  /** rank is the nearest-rank percentile p of sorted nanoseconds, in microseconds. */
  private static long rank(long[] sorted, int p) {
    if (sorted.length == 0) {
      return 0;
    }
    int i = (int) (((long) p * sorted.length + 99) / 100);
    return sorted[Math.max(i, 1) - 1] / 1000;
  }

}
