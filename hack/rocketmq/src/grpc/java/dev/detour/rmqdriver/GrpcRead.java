package dev.detour.rmqdriver;

import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;

/**
 * Reads messages back with RocketMQ 5's gRPC SDK (rocketmq-client-java), several readers in one
 * JVM, each a SimpleConsumer or a PushConsumer built with the SDK's defaults (TLS on) except its
 * endpoint, group and subscription. For every message a reader gets it prints one JSON line with
 * what the application sees, the body as its length and SHA-256, so any body can be compared:
 *
 * <pre>{"reader":"...","kind":"received","msgId":"...","topic":"...","tag":"...","keys":["..."],
 * "props":{"k":"v"},"bodyLen":1,"bodySha256":"...","error":""}</pre>
 *
 * and one line {"reader":"...","kind":"start|receive|ack","error":"..."} for a consumer that
 * cannot start, a failed receive or a failed ack.
 *
 * <p>Arguments (key=value): topics (comma-separated, every reader subscribes to all with "*"),
 * count (each reader stops once it has read this many messages), timeoutMs (every reader stops
 * after this long in any case), reader.N (N = 0, 1, ...: name,simple|push,host:port,group).
 */
public final class GrpcRead {
  private GrpcRead() {}

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = Text.arguments(argv);
    Map<String, FilterExpression> subscription = new HashMap<>();
    for (String topic : a.get("topics").split(",")) {
      subscription.put(topic, FilterExpression.SUB_ALL);
    }
    int count = Integer.parseInt(a.getOrDefault("count", "1"));
    long deadline = System.currentTimeMillis() + Long.parseLong(a.getOrDefault("timeoutMs", "60000"));
    List<Thread> readers = new ArrayList<>();
    for (int i = 0; a.containsKey("reader." + i); i++) {
      String[] spec = a.get("reader." + i).split(",");
      Thread th = new Thread(() -> read(spec, subscription, count, deadline), "reader-" + spec[0]);
      th.start();
      readers.add(th);
    }
    for (Thread th : readers) {
      th.join();
    }
    System.out.flush();
    System.exit(0);
  }

  /** Runs one reader (name, mode, endpoint, group) until it read count messages or deadline. */
  private static void read(String[] spec, Map<String, FilterExpression> subscription, int count, long deadline) {
    String name = spec[0];
    ClientServiceProvider provider = ClientServiceProvider.loadService();
    ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(spec[2]).build();
    AtomicInteger read = new AtomicInteger();
    try {
      if (spec[1].equals("push")) {
        PushConsumer consumer = provider.newPushConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(spec[3]).setSubscriptionExpressions(subscription)
            .setMessageListener(m -> {
              print(name, m);
              read.incrementAndGet();
              return ConsumeResult.SUCCESS;
            }).build();
        try {
          while (read.get() < count && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
          }
        } finally {
          consumer.close();
        }
        return;
      }
      SimpleConsumer consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(config)
          .setConsumerGroup(spec[3]).setAwaitDuration(Duration.ofSeconds(5))
          .setSubscriptionExpressions(subscription).build();
      try {
        while (read.get() < count && System.currentTimeMillis() < deadline) {
          receive(name, consumer, read);
        }
      } finally {
        consumer.close();
      }
    } catch (Throwable e) {
      failure(name, "start", e);
    }
  }

  /** One receive of a SimpleConsumer: every message printed and acked. */
  private static void receive(String name, SimpleConsumer consumer, AtomicInteger read) {
    Collection<MessageView> got;
    try {
      got = consumer.receive(16, Duration.ofSeconds(30));
    } catch (Throwable e) {
      failure(name, "receive", e);
      return;
    }
    for (MessageView m : got) {
      print(name, m);
      read.incrementAndGet();
      try {
        consumer.ack(m);
      } catch (Throwable e) {
        failure(name, "ack", e);
      }
    }
  }

  private static void failure(String name, String kind, Throwable e) {
    line("{\"reader\":" + Text.quote(name) + ",\"kind\":\"" + kind + "\",\"error\":" + Text.quote(Text.describe(e)) + "}");
  }

  private static void print(String name, MessageView m) {
    ByteBuffer body = m.getBody();
    byte[] bytes = new byte[body.remaining()];
    body.get(bytes);
    StringBuilder out = new StringBuilder("{\"reader\":").append(Text.quote(name))
        .append(",\"kind\":\"received\",\"msgId\":").append(Text.quote(m.getMessageId().toString()))
        .append(",\"topic\":").append(Text.quote(m.getTopic()))
        .append(",\"tag\":").append(Text.quote(m.getTag().orElse(""))).append(",\"keys\":[");
    String sep = "";
    for (String k : m.getKeys()) {
      out.append(sep).append(Text.quote(k));
      sep = ",";
    }
    out.append("],\"props\":{");
    sep = "";
    for (Map.Entry<String, String> e : new TreeMap<>(m.getProperties()).entrySet()) {
      out.append(sep).append(Text.quote(e.getKey())).append(':').append(Text.quote(e.getValue()));
      sep = ",";
    }
    out.append("},\"bodyLen\":").append(bytes.length).append(",\"bodySha256\":\"").append(sha256(bytes))
        .append("\",\"error\":\"\"}");
    line(out.toString());
  }

  private static String sha256(byte[] b) {
    try {
      StringBuilder hex = new StringBuilder();
      for (byte x : MessageDigest.getInstance("SHA-256").digest(b)) {
        hex.append(String.format("%02x", x));
      }
      return hex.toString();
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  /** Prints one line whole: readers run in threads of their own. */
  private static synchronized void line(String s) {
    System.out.println(s);
    System.out.flush();
  }
}
