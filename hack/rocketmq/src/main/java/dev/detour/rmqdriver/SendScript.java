package dev.detour.rmqdriver;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * Sends messages one at a time with RocketMQ's own DefaultMQProducer as a script on stdin says, and
 * prints the outcome of each as one JSON line, so a test can hold RocketMQ's retry rules (attempts
 * per send mode, retried response codes) against detour's on the same broker.
 *
 * <pre>
 * producer &lt;namesrv&gt; &lt;faultEnable 0|1&gt; &lt;retryTimesWhenSendFailed&gt; &lt;sendMsgTimeout&gt;
 *     starts a producer (shutting down the previous one) and prints {"ready":true}
 * send &lt;sync|async|oneway&gt; &lt;topic&gt;
 *     prints {"ok":true,"status":"SEND_OK","broker":"b"} or
 *            {"ok":false,"error":"ExceptionClass","code":n,"message":"first line"}
 * </pre>
 *
 * code is the broker's response code of an MQBrokerException, or the response code an
 * MQClientException carries (RocketMQ sets it to the last broker's code after retries). The last
 * line is {"done":true}.
 */
public final class SendScript {
    private SendScript() {
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        DefaultMQProducer producer = null;
        int n = 0;
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.trim().split("\\s+");
            switch (f[0]) {
                case "producer":
                    if (producer != null) {
                        producer.shutdown();
                    }
                    producer = new DefaultMQProducer("detour_retry_" + ProcessHandle.current().pid() + "_" + n);
                    producer.setInstanceName("detour-retry-" + ProcessHandle.current().pid() + "-" + n++);
                    producer.setNamesrvAddr(f[1]);
                    producer.setSendLatencyFaultEnable(f[2].equals("1"));
                    producer.setRetryTimesWhenSendFailed(Integer.parseInt(f[3]));
                    producer.setRetryTimesWhenSendAsyncFailed(Integer.parseInt(f[3]));
                    producer.setSendMsgTimeout(Integer.parseInt(f[4]));
                    producer.start();
                    System.out.println("{\"ready\":true}");
                    break;
                case "send":
                    System.out.println(send(producer, f[1], f[2]));
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + f[0]);
            }
            System.out.flush();
        }
        if (producer != null) {
            producer.shutdown();
        }
        System.out.println("{\"done\":true}");
        System.out.flush();
        System.exit(0);
    }

    private static String send(DefaultMQProducer p, String mode, String topic) throws InterruptedException {
        Message m = new Message(topic, "retry-rules".getBytes(StandardCharsets.UTF_8));
        try {
            switch (mode) {
                case "sync":
                    return ok(p.send(m));
                case "oneway":
                    p.sendOneway(m);
                    return "{\"ok\":true}";
                case "async":
                    CountDownLatch done = new CountDownLatch(1);
                    AtomicReference<Object> out = new AtomicReference<>();
                    p.send(m, new SendCallback() {
                        @Override
                        public void onSuccess(SendResult r) {
                            out.set(r);
                            done.countDown();
                        }

                        @Override
                        public void onException(Throwable e) {
                            out.set(e);
                            done.countDown();
                        }
                    });
                    if (!done.await(120, TimeUnit.SECONDS)) {
                        return "{\"ok\":false,\"error\":\"NoCallback\",\"code\":0,\"message\":\"\"}";
                    }
                    if (out.get() instanceof SendResult) {
                        return ok((SendResult) out.get());
                    }
                    return failed((Throwable) out.get());
                default:
                    throw new IllegalArgumentException("unknown mode " + mode);
            }
        } catch (InterruptedException e) {
            throw e;
        } catch (Exception e) {
            return failed(e);
        }
    }

    private static String ok(SendResult r) {
        return "{\"ok\":true,\"status\":\"" + r.getSendStatus() + "\",\"broker\":\"" + r.getMessageQueue().getBrokerName() + "\"}";
    }

    private static String failed(Throwable e) {
        int code = 0;
        if (e instanceof MQBrokerException) {
            code = ((MQBrokerException) e).getResponseCode();
        } else if (e instanceof MQClientException) {
            code = ((MQClientException) e).getResponseCode();
        }
        String msg = String.valueOf(e.getMessage()).split("\n")[0].replace("\\", "\\\\").replace("\"", "'");
        return "{\"ok\":false,\"error\":\"" + e.getClass().getSimpleName() + "\",\"code\":" + code
            + ",\"message\":\"" + msg + "\"}";
    }
}
