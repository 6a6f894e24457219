package dev.detour.rmqdriver;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.ProducerBuilder;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * Sends messages with RocketMQ 5's gRPC SDK (rocketmq-client-java), its producer built with the
 * SDK's defaults (TLS on, three attempts, 3 s per request) except the endpoint, and prints one JSON
 * line per send for the Go tests:
 *
 * <pre>{"kind":"normal|fifo|delay|commit|rollback","index":0,"ok":true,"msgId":"...","body":"...","group":"","deliverAtMs":0,"sentMs":0,"tookMs":0,"error":""}</pre>
 *
 * where tookMs is how long the SDK's send call took, all its attempts included, on a monotonic
 * clock; and, when the producer cannot even start, one line {"kind":"start","ok":false,"error":"..."}.
 *
 * <p>Arguments (key=value): endpoints (host:port), topic, normal (count), fifo (count), groups (FIFO
 * message groups, the messages spread round-robin over them), delay (count), delayMs (how far in
 * the future each delayed message asks to be delivered), tag, pauseMs (a pause after the first half
 * of the normal messages, so that the producer's heartbeats and route refresh run mid-session),
 * accessKey and secretKey (when both are given, the calls are signed with them through the SDK's
 * StaticSessionCredentialsProvider), commit and rollback (counts of transactional messages, each sent
 * in its own transaction, then committed or rolled back; the producer then has a TransactionChecker,
 * which answers a check-back of a message by its kind: COMMIT for commit and orphan-commit, ROLLBACK
 * otherwise, and prints a line {"checked":"kind","msgId":"...","body":"...","verdict":"..."} for each
 * check); orphanCommit and orphanRollback (counts of transactional messages sent and never ended, of
 * kinds orphan-commit and orphan-rollback: the producer then stays until its checker has answered a
 * check-back for each, or maxMs has passed, and then a grace of graceMs (default 3000) in which the
 * SDK sends the ends, which nothing tells the driver it has done); and,
 * for a stream that spans a disruption whose length is not known in advance, stopFile (a path:
 * normal messages are then sent one every intervalMs, the count ignored, until that file exists or
 * maxMs has passed, whichever comes first), intervalMs and maxMs.
 * Every message carries the user property detour-kind, its kind.
 */
public final class GrpcProduce {
  private GrpcProduce() {}

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = Text.arguments(argv);
    String topic = a.get("topic");
    String nonce = Long.toString(System.nanoTime(), 36);
    int normal = Integer.parseInt(a.getOrDefault("normal", "0"));
    int fifo = Integer.parseInt(a.getOrDefault("fifo", "0"));
    int groups = Math.max(1, Integer.parseInt(a.getOrDefault("groups", "1")));
    int delay = Integer.parseInt(a.getOrDefault("delay", "0"));
    long delayMs = Long.parseLong(a.getOrDefault("delayMs", "0"));
    String tag = a.getOrDefault("tag", "grpc");
    long pauseMs = Long.parseLong(a.getOrDefault("pauseMs", "0"));
    int commit = Integer.parseInt(a.getOrDefault("commit", "0"));
    int rollback = Integer.parseInt(a.getOrDefault("rollback", "0"));
    int orphanCommit = Integer.parseInt(a.getOrDefault("orphanCommit", "0"));
    int orphanRollback = Integer.parseInt(a.getOrDefault("orphanRollback", "0"));
    Set<String> checkedOrphans = ConcurrentHashMap.newKeySet();

    ClientServiceProvider provider = ClientServiceProvider.loadService();
    ClientConfigurationBuilder builder = ClientConfiguration.newBuilder().setEndpoints(a.get("endpoints"));
    if (a.containsKey("accessKey") && a.containsKey("secretKey")) {
      builder.setCredentialProvider(new StaticSessionCredentialsProvider(a.get("accessKey"), a.get("secretKey")));
    }
    ClientConfiguration config = builder.build();
    Producer producer;
    try {
      ProducerBuilder pb = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic);
      if (commit + rollback + orphanCommit + orphanRollback > 0) {
        pb.setTransactionChecker(view -> {
          String kind = view.getProperties().getOrDefault("detour-kind", "");
          TransactionResolution verdict = kind.equals("commit") || kind.equals("orphan-commit")
              ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
          String body = StandardCharsets.UTF_8.decode(view.getBody()).toString();
          if (kind.startsWith("orphan-")) {
            checkedOrphans.add(view.getMessageId().toString());
          }
          synchronized (System.out) {
            System.out.println("{\"checked\":" + Text.quote(kind) + ",\"msgId\":" + Text.quote(view.getMessageId().toString())
                + ",\"body\":" + Text.quote(body) + ",\"verdict\":" + Text.quote(verdict.name()) + "}");
            System.out.flush();
          }
          return verdict;
        });
      }
      producer = pb.build();
    } catch (Throwable e) {
      System.out.println("{\"kind\":\"start\",\"ok\":false,\"error\":" + Text.quote(Text.describe(e)) + "}");
      System.out.flush();
      System.exit(2);
      return;
    }
    try {
      if (a.containsKey("stopFile")) {
        stream(provider, producer, topic, tag, nonce, Paths.get(a.get("stopFile")),
            Long.parseLong(a.getOrDefault("intervalMs", "100")), Long.parseLong(a.getOrDefault("maxMs", "600000")));
      }
      for (int i = 0; i < normal && !a.containsKey("stopFile"); i++) {
        if (i == normal / 2 && pauseMs > 0) {
          Thread.sleep(pauseMs);
        }
        send(provider, producer, topic, tag, "normal", i, nonce, null, 0);
      }
      for (int i = 0; i < fifo; i++) {
        send(provider, producer, topic, tag, "fifo", i, nonce, "group-" + (i % groups), 0);
      }
      for (int i = 0; i < delay; i++) {
        send(provider, producer, topic, tag, "delay", i, nonce, null, System.currentTimeMillis() + delayMs);
      }
      for (int i = 0; i < commit; i++) {
        send(provider, producer, topic, tag, "commit", i, nonce, null, 0);
      }
      for (int i = 0; i < rollback; i++) {
        send(provider, producer, topic, tag, "rollback", i, nonce, null, 0);
      }
      for (int i = 0; i < orphanCommit; i++) {
        send(provider, producer, topic, tag, "orphan-commit", i, nonce, null, 0);
      }
      for (int i = 0; i < orphanRollback; i++) {
        send(provider, producer, topic, tag, "orphan-rollback", i, nonce, null, 0);
      }
      if (orphanCommit + orphanRollback > 0) {
        long deadline = System.nanoTime() + Long.parseLong(a.getOrDefault("maxMs", "120000")) * 1_000_000;
        while (checkedOrphans.size() < orphanCommit + orphanRollback && System.nanoTime() < deadline) {
          Thread.sleep(100);
        }
        Thread.sleep(Long.parseLong(a.getOrDefault("graceMs", "3000")));
      }
    } finally {
      producer.close();
    }
    System.out.flush();
    System.exit(0);
  }

  /**
   * Sends normal messages on a fixed schedule of one every intervalMs until stop exists or maxMs
   * has passed. A send waits for the next slot of the schedule; slots missed while a send was slow
   * are dropped, as a ticker drops them, so a stall is not followed by a burst.
   */
  private static void stream(ClientServiceProvider provider, Producer producer, String topic, String tag,
      String nonce, Path stop, long intervalMs, long maxMs) throws InterruptedException {
    long t0 = System.nanoTime();
    for (int i = 0; !Files.exists(stop); i++) {
      long elapsedMs = (System.nanoTime() - t0) / 1_000_000;
      if (elapsedMs >= maxMs) {
        break;
      }
      long nextSlotMs = (elapsedMs + intervalMs - 1) / intervalMs * intervalMs;
      if (nextSlotMs > elapsedMs) {
        Thread.sleep(nextSlotMs - elapsedMs);
      }
      send(provider, producer, topic, tag, "normal", i, nonce, null, 0);
    }
  }

  private static void send(ClientServiceProvider provider, Producer producer, String topic, String tag,
      String kind, int index, String nonce, String group, long deliverAt) {
    String body = "grpc-" + kind + "-" + index + "-" + nonce;
    MessageBuilder b = provider.newMessageBuilder().setTopic(topic).setTag(tag).setKeys(body)
        .addProperty("detour-kind", kind).setBody(body.getBytes(StandardCharsets.UTF_8));
    if (group != null) {
      b.setMessageGroup(group);
    }
    if (deliverAt > 0) {
      b.setDeliveryTimestamp(deliverAt);
    }
    Message m = b.build();
    long sent = System.currentTimeMillis();
    StringBuilder out = new StringBuilder("{\"kind\":").append(Text.quote(kind)).append(",\"index\":").append(index)
        .append(",\"body\":").append(Text.quote(body)).append(",\"group\":").append(Text.quote(group == null ? "" : group))
        .append(",\"deliverAtMs\":").append(deliverAt).append(",\"sentMs\":").append(sent);
    long start = System.nanoTime();
    try {
      SendReceipt r;
      if (kind.startsWith("orphan-")) {
        r = producer.send(m, producer.beginTransaction()); // never ended: the broker checks back
      } else if (kind.equals("commit") || kind.equals("rollback")) {
        Transaction tx = producer.beginTransaction();
        r = producer.send(m, tx);
        if (kind.equals("commit")) {
          tx.commit();
        } else {
          tx.rollback();
        }
      } else {
        r = producer.send(m);
      }
      out.append(",\"tookMs\":").append(tookMs(start));
      out.append(",\"ok\":true,\"msgId\":").append(Text.quote(r.getMessageId().toString())).append(",\"error\":\"\"}");
    } catch (Throwable e) {
      out.append(",\"tookMs\":").append(tookMs(start));
      out.append(",\"ok\":false,\"msgId\":\"\",\"error\":").append(Text.quote(Text.describe(e))).append('}');
    }
    System.out.println(out);
    System.out.flush();
  }

  private static long tookMs(long startNanos) {
    return (System.nanoTime() - startNanos) / 1_000_000;
  }


}
