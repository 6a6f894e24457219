package dev.detour.rmqdriver;

import java.io.PrintStream;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.hook.SendMessageContext;
import org.apache.rocketmq.client.hook.SendMessageHook;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * Sends messages with RocketMQ's own DefaultMQProducer on a paced schedule and prints one JSON line
 * per send, so tests and the fault benchmark can measure the real Java producer under the same
 * load as detour.
 *
 * <pre>
 * Produce key=value ...
 *   namesrv=host:port[;host:port]   topic=T   group=G
 *   senders=4   rate=200 (sends per second, all senders)   durationMs=10000   size=128
 *   faultEnable=false (sendLatencyFaultEnable)   pollMs=30000 (pollNameServerInterval)
 *   retries=2 (retryTimesWhenSendFailed)   timeoutMs=3000 (sendMsgTimeout)
 *   perAttemptMs=0 (sendMsgMaxTimeoutPerRequest, 5.x only; 0 leaves it unset)
 *   detector=false (startDetectorEnable, 5.x only: the fault strategy's detector probes the
 *                   brokers it isolated and lifts an isolation once one answers)
 *   startAtMs=0 (epoch millis of the first slot; 0 = now; "stdin" = read it as one line from
 *                standard input after the ready line, so a harness can start the clock once the
 *                JVM is warm)
 *   warmup=0 (sends before the ready line, not recorded: connections and the route, as a
 *             harness warms up its other producers)
 *   shared=false (true: the senders share one schedule, slot i at t0 + i/rate, and a sender that
 *                 is behind sends at once; nothing is issued later than graceMs after the end.
 *                 false: each sender keeps its own slots and sends all of them)
 *   graceMs=100
 *   stopFile= (a path: each sender ends before its next send once the file exists, for a stream
 *             that spans disruptions whose length is not known in advance; durationMs still
 *             bounds it)
 * </pre>
 *
 * Each line: {"sender":s,"startMs":epoch ms,"latencyUs":n,"ok":bool,"broker":"b","queueId":q,"msgId":"id",
 * "brokers":["tried",...],"error":"...","slot":i,"attempts":[{"broker":"b","startUs":n,"latencyUs":n,
 * "ok":bool},...]} (slot and attempts were added later; readers of the older fields are unaffected;
 * an attempt's startUs is from the send's start). A line {"ready":true} is printed once the
 * producer has started, and {"done":true,"sends":n} at the end.
 */
public final class Produce {
    private Produce() {
    }

    /** Brokers of every attempt of the send running on this thread, from the send hook. */
    private static final ThreadLocal<List<String>> TRIED = ThreadLocal.withInitial(ArrayList::new);

    /** Every attempt of the send running on this thread: {start ns, end ns (0 = none), ok}. */
    private static final ThreadLocal<List<long[]>> ATTEMPTS = ThreadLocal.withInitial(ArrayList::new);

    public static void main(String[] args) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (String arg : args) {
            int eq = arg.indexOf('=');
            if (eq <= 0) {
                System.err.println("argument " + arg + " is not key=value");
                System.exit(2);
            }
            a.put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        final String topic = a.getOrDefault("topic", "TopicTest");
        final int senders = Integer.parseInt(a.getOrDefault("senders", "4"));
        final double rate = Double.parseDouble(a.getOrDefault("rate", "200"));
        final long durationMs = Long.parseLong(a.getOrDefault("durationMs", "10000"));
        final int size = Integer.parseInt(a.getOrDefault("size", "128"));

        DefaultMQProducer producer = new DefaultMQProducer(a.getOrDefault("group", "detour_java_" + ProcessHandle.current().pid()));
        producer.setNamesrvAddr(a.get("namesrv"));
        producer.setInstanceName("detour-java-" + ProcessHandle.current().pid());
        producer.setSendLatencyFaultEnable(Boolean.parseBoolean(a.getOrDefault("faultEnable", "false")));
        producer.setPollNameServerInterval(Integer.parseInt(a.getOrDefault("pollMs", "30000")));
        producer.setRetryTimesWhenSendFailed(Integer.parseInt(a.getOrDefault("retries", "2")));
        producer.setSendMsgTimeout(Integer.parseInt(a.getOrDefault("timeoutMs", "3000")));
        int perAttempt = Integer.parseInt(a.getOrDefault("perAttemptMs", "0"));
        if (perAttempt > 0) {
            Method m = DefaultMQProducer.class.getMethod("setSendMsgMaxTimeoutPerRequest", int.class);
            m.invoke(producer, perAttempt);
        }
        if (Boolean.parseBoolean(a.getOrDefault("detector", "false"))) {
            // Looked up by name, as sendMsgMaxTimeoutPerRequest is: the 4.9 client has neither.
            Method m = DefaultMQProducer.class.getMethod("setStartDetectorEnable", boolean.class);
            m.invoke(producer, true);
        }
        producer.getDefaultMQProducerImpl().registerSendMessageHook(new SendMessageHook() {
            @Override
            public String hookName() {
                return "detour-attempts";
            }

            @Override
            public void sendMessageBefore(SendMessageContext context) {
                TRIED.get().add(context.getMq().getBrokerName());
                ATTEMPTS.get().add(new long[] {System.nanoTime(), 0, 0});
            }

            @Override
            public void sendMessageAfter(SendMessageContext context) {
                List<long[]> at = ATTEMPTS.get();
                if (at.isEmpty()) {
                    return;
                }
                long[] last = at.get(at.size() - 1);
                last[1] = System.nanoTime();
                boolean ok = context.getException() == null && context.getSendResult() != null
                    && context.getSendResult().getSendStatus() == org.apache.rocketmq.client.producer.SendStatus.SEND_OK;
                last[2] = ok ? 1 : 0;
            }
        });
        producer.start();
        final int warmup = Integer.parseInt(a.getOrDefault("warmup", "0"));
        for (int i = 0; i < warmup; i++) {
            try {
                producer.send(new Message(topic, new byte[] {'w'}));
            } catch (Exception e) {
                System.err.println("warm-up send failed: " + e);
            }
        }
        final PrintStream out = System.out;
        synchronized (out) {
            out.println("{\"ready\":true}");
            out.flush();
        }

        final byte[] body = new byte[size];
        for (int i = 0; i < size; i++) {
            body[i] = (byte) ('a' + i % 26);
        }
        String startArg = a.getOrDefault("startAtMs", "0");
        long startAt;
        if (startArg.equals("stdin")) {
            String line = new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
            startAt = line == null ? 0 : Long.parseLong(line.trim());
        } else {
            startAt = Long.parseLong(startArg);
        }
        final long t0 = startAt > 0 ? startAt : System.currentTimeMillis();
        final long end = t0 + durationMs;
        final boolean shared = Boolean.parseBoolean(a.getOrDefault("shared", "false"));
        final long graceMs = Long.parseLong(a.getOrDefault("graceMs", "100"));
        final java.nio.file.Path stopFile = a.containsKey("stopFile") ? java.nio.file.Paths.get(a.get("stopFile")) : null;
        final long scheduled = (long) Math.floor(durationMs / 1000.0 * rate);
        final AtomicLong nextSlot = new AtomicLong();
        final double gapMs = senders * 1000.0 / rate; // milliseconds between one sender's slots
        final AtomicLong sends = new AtomicLong();
        final CountDownLatch done = new CountDownLatch(senders);
        for (int s = 0; s < senders; s++) {
            final int sender = s;
            Thread th = new Thread(() -> {
                try {
                    StringBuilder b = new StringBuilder(256);
                    for (long k = 0; ; k++) {
                        long index = k;
                        long slot;
                        if (shared) {
                            index = nextSlot.getAndIncrement();
                            if (index >= scheduled) {
                                break;
                            }
                            slot = t0 + (long) Math.floor(index * 1000.0 / rate);
                        } else {
                            slot = t0 + (long) ((k + (double) sender / senders) * gapMs);
                            if (slot >= end) {
                                break;
                            }
                        }
                        long wait = slot - System.currentTimeMillis();
                        if (wait > 0) {
                            Thread.sleep(wait);
                        }
                        if (shared && System.currentTimeMillis() >= end + graceMs) {
                            break;
                        }
                        if (stopFile != null && java.nio.file.Files.exists(stopFile)) {
                            break;
                        }
                        TRIED.get().clear();
                        ATTEMPTS.get().clear();
                        long startMs = System.currentTimeMillis();
                        long startNs = System.nanoTime();
                        String broker = null;
                        String msgId = null;
                        int queueId = -1;
                        String error = null;
                        try {
                            SendResult r = producer.send(new Message(topic, body));
                            broker = r.getMessageQueue().getBrokerName();
                            queueId = r.getMessageQueue().getQueueId();
                            msgId = r.getMsgId();
                            if (r.getSendStatus() != org.apache.rocketmq.client.producer.SendStatus.SEND_OK) {
                                error = r.getSendStatus().name();
                            }
                        } catch (Exception e) {
                            error = e.getClass().getSimpleName() + ": " + e.getMessage();
                        }
                        long latencyUs = (System.nanoTime() - startNs) / 1000;
                        b.setLength(0);
                        b.append("{\"sender\":").append(sender).append(",\"startMs\":").append(startMs)
                            .append(",\"latencyUs\":").append(latencyUs).append(",\"ok\":").append(error == null || broker != null);
                        if (broker != null) {
                            b.append(",\"broker\":");
                            quote(b, broker).append(",\"queueId\":").append(queueId);
                        }
                        if (msgId != null) {
                            b.append(",\"msgId\":");
                            quote(b, msgId);
                        }
                        b.append(",\"brokers\":[");
                        List<String> tried = TRIED.get();
                        for (int i = 0; i < tried.size(); i++) {
                            if (i > 0) {
                                b.append(',');
                            }
                            quote(b, tried.get(i));
                        }
                        b.append(']');
                        b.append(",\"slot\":").append(index).append(",\"attempts\":[");
                        List<long[]> at = ATTEMPTS.get();
                        long endNs = startNs + latencyUs * 1000;
                        for (int i = 0; i < at.size(); i++) {
                            long[] x = at.get(i);
                            if (i > 0) {
                                b.append(',');
                            }
                            // An attempt the hook saw no end of ended with the send.
                            long xEnd = x[1] != 0 ? x[1] : endNs;
                            b.append("{\"broker\":");
                            quote(b, tried.get(i)).append(",\"startUs\":").append((x[0] - startNs) / 1000)
                                .append(",\"latencyUs\":").append((xEnd - x[0]) / 1000).append(",\"ok\":").append(x[2] == 1);
                            b.append('}');
                        }
                        b.append(']');
                        if (error != null) {
                            b.append(",\"error\":");
                            quote(b, error);
                        }
                        b.append('}');
                        synchronized (out) {
                            out.println(b);
                        }
                        sends.incrementAndGet();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    done.countDown();
                }
            }, "sender-" + s);
            th.start();
        }
        done.await();
        synchronized (out) {
            out.println("{\"done\":true,\"sends\":" + sends.get() + "}");
            out.flush();
        }
        producer.shutdown();
        System.exit(0);
    }

    private static StringBuilder quote(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"');
    }
}
