package dev.detour.rmqdriver;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Reads every message of one topic from offset 0 of every queue with RocketMQ's own lite pull
 * consumer and prints each as one JSON line on stdout. Tests compare what they sent with what the
 * real broker stored and what a real consumer sees.
 *
 * <pre>
 * Consume &lt;namesrv host:port&gt; &lt;topic&gt; &lt;expected count&gt; &lt;timeout millis&gt;
 * </pre>
 *
 * After the expected count it keeps reading until one poll comes back empty, so a message stored
 * twice shows up as an extra line. The process exits 0 when it saw at least the expected count and
 * 3 when the timeout ran out first; the last line is always {"done":true,"count":N}.
 */
public final class Consume {
    private Consume() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: Consume <namesrv> <topic> <expected> <timeoutMillis>");
            System.exit(2);
        }
        String namesrv = args[0];
        String topic = args[1];
        long expected = Long.parseLong(args[2]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[3]);

        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer("detour_check_" + System.nanoTime());
        consumer.setNamesrvAddr(namesrv);
        consumer.setAutoCommit(false);
        // A new group starts every queue at its first offset. (Seeking after assign() races the
        // pull threads assign() starts: seek interrupts them, and an interrupted pull can close the
        // connection seek's own request needs, which a loaded machine hits.)
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setInstanceName("detour-check-" + ProcessHandle.current().pid());
        consumer.start();
        long count = 0;
        try {
            Collection<MessageQueue> queues = consumer.fetchMessageQueues(topic);
            consumer.assign(queues);
            StringBuilder out = new StringBuilder(4096);
            while (System.currentTimeMillis() < deadline) {
                List<MessageExt> batch = consumer.poll(500);
                if (batch.isEmpty() && count >= expected) {
                    break;
                }
                for (MessageExt m : batch) {
                    out.setLength(0);
                    line(out, m);
                    System.out.println(out);
                    count++;
                }
            }
        } finally {
            System.out.println("{\"done\":true,\"count\":" + count + "}");
            System.out.flush();
            consumer.shutdown();
        }
        System.exit(count >= expected ? 0 : 3);
    }

    private static void line(StringBuilder b, MessageExt m) {
        b.append('{');
        field(b, "msgId", m.getMsgId()).append(',');
        field(b, "offsetMsgId", offsetMsgId(m)).append(',');
        field(b, "topic", m.getTopic()).append(',');
        field(b, "brokerName", m.getBrokerName()).append(',');
        b.append("\"queueId\":").append(m.getQueueId()).append(',');
        b.append("\"queueOffset\":").append(m.getQueueOffset()).append(',');
        b.append("\"reconsumeTimes\":").append(m.getReconsumeTimes()).append(',');
        b.append("\"sysFlag\":").append(m.getSysFlag()).append(',');
        field(b, "tags", m.getTags()).append(',');
        field(b, "keys", m.getKeys()).append(',');
        b.append("\"properties\":{");
        boolean first = true;
        Map<String, String> props = new TreeMap<>(m.getProperties());
        for (Map.Entry<String, String> e : props.entrySet()) {
            if (!first) {
                b.append(',');
            }
            first = false;
            field(b, e.getKey(), e.getValue());
        }
        b.append("},");
        field(b, "body", Base64.getEncoder().encodeToString(m.getBody() == null ? new byte[0] : m.getBody()));
        b.append('}');
    }

    /** The broker's own id (store host and commit log offset), which MessageExt keeps apart from UNIQ_KEY. */
    private static String offsetMsgId(MessageExt m) {
        try {
            return (String) m.getClass().getMethod("getOffsetMsgId").invoke(m);
        } catch (ReflectiveOperationException e) {
            return null;
        }
    }

    private static StringBuilder field(StringBuilder b, String name, String value) {
        quote(b, name).append(':');
        if (value == null) {
            return b.append("null");
        }
        return quote(b, value);
    }

    private static StringBuilder quote(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"');
    }
}
