package dev.detour.rmqdriver;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;

/**
 * Sends messages with RocketMQ 5's gRPC SDK (rocketmq-client-java), its producer built with the
 * SDK's defaults (TLS on, three attempts, 3 s per request) except the endpoint, and prints one JSON
 * line per send for the Go tests:
 *
 * <pre>{"kind":"normal|fifo|delay","index":0,"ok":true,"msgId":"...","body":"...","group":"","deliverAtMs":0,"sentMs":0,"error":""}</pre>
 *
 * and, when the producer cannot even start, one line {"kind":"start","ok":false,"error":"..."}.
 *
 * <p>Arguments (key=value): endpoints (host:port), topic, normal (count), fifo (count), groups (FIFO
 * message groups, the messages spread round-robin over them), delay (count), delayMs (how far in
 * the future each delayed message asks to be delivered), tag, pauseMs (a pause after the first half
 * of the normal messages, so that the producer's heartbeats and route refresh run mid-session).
 * Every message carries the user property detour-kind, its kind.
 */
public final class GrpcProduce {
  private GrpcProduce() {}

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = new HashMap<>();
    for (String s : argv) {
      int eq = s.indexOf('=');
      if (eq < 0) {
        throw new IllegalArgumentException("argument " + s + " is not key=value");
      }
      a.put(s.substring(0, eq), s.substring(eq + 1));
    }
    String topic = a.get("topic");
    String nonce = Long.toString(System.nanoTime(), 36);
    int normal = Integer.parseInt(a.getOrDefault("normal", "0"));
    int fifo = Integer.parseInt(a.getOrDefault("fifo", "0"));
    int groups = Math.max(1, Integer.parseInt(a.getOrDefault("groups", "1")));
    int delay = Integer.parseInt(a.getOrDefault("delay", "0"));
    long delayMs = Long.parseLong(a.getOrDefault("delayMs", "0"));
    String tag = a.getOrDefault("tag", "grpc");
    long pauseMs = Long.parseLong(a.getOrDefault("pauseMs", "0"));

    ClientServiceProvider provider = ClientServiceProvider.loadService();
    ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(a.get("endpoints")).build();
    Producer producer;
    try {
      producer = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build();
    } catch (Throwable e) {
      System.out.println("{\"kind\":\"start\",\"ok\":false,\"error\":" + quote(describe(e)) + "}");
      System.out.flush();
      System.exit(2);
      return;
    }
    try {
      for (int i = 0; i < normal; i++) {
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
    } finally {
      producer.close();
    }
    System.out.flush();
    System.exit(0);
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
    StringBuilder out = new StringBuilder("{\"kind\":").append(quote(kind)).append(",\"index\":").append(index)
        .append(",\"body\":").append(quote(body)).append(",\"group\":").append(quote(group == null ? "" : group))
        .append(",\"deliverAtMs\":").append(deliverAt).append(",\"sentMs\":").append(sent);
    try {
      SendReceipt r = producer.send(m);
      out.append(",\"ok\":true,\"msgId\":").append(quote(r.getMessageId().toString())).append(",\"error\":\"\"}");
    } catch (Throwable e) {
      out.append(",\"ok\":false,\"msgId\":\"\",\"error\":").append(quote(describe(e))).append('}');
    }
    System.out.println(out);
    System.out.flush();
  }

  private static String describe(Throwable e) {
    StringBuilder s = new StringBuilder();
    for (Throwable c = e; c != null && s.length() < 2000; c = c.getCause()) {
      if (s.length() > 0) {
        s.append(" <- ");
      }
      s.append(c.getClass().getName()).append(": ").append(c.getMessage());
      if (c.getCause() == c) {
        break;
      }
    }
    return s.toString();
  }

  private static String quote(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }
}
