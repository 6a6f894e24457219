package dev.detour.rmqdriver;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;

/**
 * Receives and acknowledges messages with RocketMQ 5's gRPC SDK (rocketmq-client-java), a
 * SimpleConsumer built with the SDK's defaults (TLS on) except the endpoint, its group and
 * subscription, and prints one JSON line per message it received for the Go tests:
 *
 * <pre>{"kind":"received","msgId":"...","body":"...","tag":"...","acked":true,"error":""}</pre>
 *
 * and, when the consumer cannot start, one line {"kind":"start","acked":false,"error":"..."}.
 *
 * <p>Arguments (key=value): endpoints (host:port), topic, group (the consumer group), count (stop
 * once this many messages are acknowledged), timeoutMs (stop receiving after this long in any
 * case), awaitMs (each receive's long poll).
 */
public final class GrpcConsume {
  private GrpcConsume() {}

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = Text.arguments(argv);
    String topic = a.get("topic");
    int count = Integer.parseInt(a.getOrDefault("count", "1"));
    long timeoutMs = Long.parseLong(a.getOrDefault("timeoutMs", "60000"));
    long awaitMs = Long.parseLong(a.getOrDefault("awaitMs", "5000"));

    ClientServiceProvider provider = ClientServiceProvider.loadService();
    ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(a.get("endpoints")).build();
    SimpleConsumer consumer;
    try {
      consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(config)
          .setConsumerGroup(a.get("group")).setAwaitDuration(Duration.ofMillis(awaitMs))
          .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL)).build();
    } catch (Throwable e) {
      System.out.println("{\"kind\":\"start\",\"acked\":false,\"error\":" + Text.quote(Text.describe(e)) + "}");
      System.out.flush();
      System.exit(2);
      return;
    }
    long deadline = System.currentTimeMillis() + timeoutMs;
    int acked = 0;
    try {
      while (acked < count && System.currentTimeMillis() < deadline) {
        List<MessageView> got;
        try {
          got = consumer.receive(16, Duration.ofSeconds(30));
        } catch (Throwable e) {
          System.out.println("{\"kind\":\"receive\",\"acked\":false,\"error\":" + Text.quote(Text.describe(e)) + "}");
          System.out.flush();
          continue;
        }
        for (MessageView m : got) {
          if (ack(consumer, m)) {
            acked++;
          }
        }
      }
    } finally {
      consumer.close();
    }
    System.out.flush();
    System.exit(0);
  }

  private static boolean ack(SimpleConsumer consumer, MessageView m) {
    ByteBuffer body = m.getBody();
    byte[] bytes = new byte[body.remaining()];
    body.get(bytes);
    StringBuilder out = new StringBuilder("{\"kind\":\"received\",\"msgId\":").append(Text.quote(m.getMessageId().toString()))
        .append(",\"body\":").append(Text.quote(new String(bytes, StandardCharsets.UTF_8)))
        .append(",\"tag\":").append(Text.quote(m.getTag().orElse("")));
    boolean ok;
    try {
      consumer.ack(m);
      out.append(",\"acked\":true,\"error\":\"\"}");
      ok = true;
    } catch (Throwable e) {
      out.append(",\"acked\":false,\"error\":").append(Text.quote(Text.describe(e))).append('}');
      ok = false;
    }
    System.out.println(out);
    System.out.flush();
    return ok;
  }


}
