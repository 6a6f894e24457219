package dev.detour.rmqdriver;

import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.client.common.ThreadLocalIndex;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.client.impl.producer.DefaultMQProducerImpl;
import org.apache.rocketmq.client.impl.producer.TopicPublishInfo;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.RemotingClient;
import org.apache.rocketmq.remoting.exception.RemotingConnectException;
import org.apache.rocketmq.remoting.exception.RemotingSendRequestException;
import org.apache.rocketmq.remoting.exception.RemotingTimeoutException;
import org.apache.rocketmq.remoting.exception.RemotingTooMuchRequestException;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * Runs a script of whole sync sends through RocketMQ's own DefaultMQProducer, over brokers the
 * script describes, on a clock the script moves, and prints after every send how it ended, the
 * queue of each of its attempts, the sending thread's queue index and every routed broker's fault
 * item, one JSON line each. A Go test runs the same script through detour's Runtime.Send and
 * requires the same lines.
 *
 * <p>Every class of RocketMQ's client is loaded through FaultScript.ClockLoader, so their calls of
 * System.currentTimeMillis read FaultScript.VirtualClock; the run fails if the producer, its
 * remoting API or the fault items read no clock to rewrite. The producer's remoting client is
 * replaced by one that answers as the script's brokers do (the Go test's scriptedWire answers the
 * same way): a request with no time left times out at once; an answer latency ms away arrives if
 * that is less than the time left, else the request times out when the time left (plus the
 * broker's lateness) is up. Everything above it, from send() to the fault table, is RocketMQ's.
 *
 * <pre>
 * begin &lt;RocketMQ5|RocketMQ4|Disabled&gt; &lt;sendMsgTimeout&gt; &lt;attempts&gt;   the next episode's settings
 * route &lt;broker&gt;:&lt;queues&gt;[:noaddr] ...   starts it with this route (noaddr: no master address)
 * index &lt;int&gt;                             the sending thread's queue index
 * worst &lt;int&gt;                             the index pickOneAtLeast counts from (4.x)
 * draws &lt;seed&gt;                            index resets draw the k-th value of a sequence from seed
 * fault &lt;broker&gt; &lt;kind&gt; &lt;code&gt; &lt;ms&gt; &lt;late&gt;  how broker answers: ok, stored, code, reset, refuse, hang
 * unaddress &lt;broker&gt;                      its master leaves the route; its queues stay named
 * send                                    one sync send
 * advance &lt;ms&gt;                            moves the clock
 * </pre>
 */
public final class LoopScript {
    private LoopScript() {
    }

    private static final String[] OWN = {"org.apache.rocketmq.client.", "dev.detour.rmqdriver.LoopScript",
        "dev.detour.rmqdriver.FaultScript$VirtualClock"};

    private static final String[] CLOCKED = {
        "org.apache.rocketmq.client.impl.producer.DefaultMQProducerImpl",
        "org.apache.rocketmq.client.impl.MQClientAPIImpl",
        "org.apache.rocketmq.client.latency.LatencyFaultToleranceImpl$FaultItem"};

    public static void main(String[] args) throws Exception {
        System.exit(FaultScript.runThrough(Runner.class.getName(),
            new FaultScript.ClockLoader(LoopScript.class.getClassLoader(), OWN, FaultScript.clocked(CLOCKED))));
    }

    /** How a scripted broker answers. */
    static final class Behaviour {
        final String kind;
        final int code;
        final long latency;
        final long late;

        Behaviour(String kind, int code, long latency, long late) {
            this.kind = kind;
            this.code = code;
            this.latency = latency;
            this.late = late;
        }
    }

    /** Runs the script; loaded by the ClockLoader with the client classes. */
    public static final class Runner {
        private static final int GET_ROUTEINFO_BY_TOPIC = 105;
        private static final int SEND_MESSAGE = 10;
        private static final int SEND_MESSAGE_V2 = 310;

        private final PrintStream out;
        private String[] begin;
        private DefaultMQProducer producer;
        private TopicPublishInfo tp;
        private final List<String> brokers = new ArrayList<>();
        private final Map<String, String> byAddr = new ConcurrentHashMap<>();
        private final Map<String, Behaviour> behave = new ConcurrentHashMap<>();
        private final List<String> attempts = Collections.synchronizedList(new ArrayList<>());
        private final Draws draws = new Draws();
        private volatile byte[] routeBody;
        private int episode;
        private volatile String topic;
        private String[] route;

        private Runner(PrintStream out) {
            this.out = out;
        }

        public static int run(InputStream in, PrintStream out) throws Exception {
            Runner r = new Runner(out);
            BufferedReader rd = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
            int step = 0;
            try {
                for (String line; (line = rd.readLine()) != null; ) {
                    step++;
                    line = line.trim();
                    if (line.isEmpty()) {
                        continue;
                    }
                    try {
                        r.exec(step, line.split("\\s+"));
                    } catch (Exception e) {
                        throw new IllegalStateException("step " + step + " (" + line + ")", e);
                    }
                }
            } finally {
                r.stop();
            }
            out.println("{\"done\":true,\"steps\":" + step + "}");
            return 0;
        }

        private void exec(int step, String[] f) throws Exception {
            switch (f[0]) {
                case "begin":
                    begin = f;
                    break;
                case "route":
                    start(f);
                    break;
                case "index":
                    setIndex(tp.getSendWhichQueue(), Integer.parseInt(f[1]));
                    break;
                case "worst":
                    setIndex((ThreadLocalIndex) field(tolerance(), "whichItemWorst"), Integer.parseInt(f[1]));
                    break;
                case "draws":
                    draws.seed = Long.parseLong(f[1]);
                    draws.k = 0;
                    break;
                case "fault":
                    behave.put(f[1], new Behaviour(f[2], Integer.parseInt(f[3]), Long.parseLong(f[4]), Long.parseLong(f[5])));
                    break;
                case "unaddress":
                    unaddress(f[1]);
                    break;
                case "send":
                    send(step);
                    break;
                case "advance":
                    FaultScript.VirtualClock.advance(Long.parseLong(f[1]));
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + f[0]);
            }
        }

        /**
         * Starts an episode over the route in f, with begin's preset, budget and attempts. One
         * producer serves every episode (starting one takes seconds): each episode sends to a
         * topic of its own, whose publish info (and so thread index) is new, after the fault
         * table, the broker addresses and the routes learnt before are cleared.
         */
        private void start(String[] f) throws Exception {
            String preset = begin[1];
            boolean v5 = hasClass("org.apache.rocketmq.client.latency.Resolver");
            if (preset.equals("RocketMQ5") != v5 && !preset.equals("Disabled")) {
                throw new IllegalArgumentException(preset + " does not run on client " + (v5 ? "5.x" : "4.x"));
            }
            if (producer == null) {
                startProducer();
            }
            DefaultMQProducerImpl impl = producer.getDefaultMQProducerImpl();
            MQClientInstance factory = (MQClientInstance) field(impl, "mQClientFactory");
            // Under the client's own lock for route updates, so that no refresh in flight
            // brings the last episode's addresses back.
            java.util.concurrent.locks.Lock lock = (java.util.concurrent.locks.Lock) field(factory, "lockNamesrv");
            lock.lock();
            try {
                if (topic != null) {
                    impl.getTopicPublishInfoTable().remove(topic);
                    topic = null;
                }
                ((Map<?, ?>) field(tolerance(), "faultItemTable")).clear();
                ((Map<?, ?>) field(factory, "brokerAddrTable")).clear();
                ((Map<?, ?>) field(factory, "topicRouteTable")).clear();
            } finally {
                lock.unlock();
            }
            brokers.clear();
            byAddr.clear();
            behave.clear();
            routeBody = routeBody(f);
            route = f;
            episode++;
            topic = "T" + episode;
            producer.setSendLatencyFaultEnable(!preset.equals("Disabled"));
            producer.setSendMsgTimeout(Integer.parseInt(begin[2]));
            producer.setRetryTimesWhenSendFailed(Integer.parseInt(begin[3]) - 1);
            if (!factory.updateTopicRouteInfoFromNameServer(topic)) {
                throw new IllegalStateException("the producer did not take the scripted route");
            }
            tp = impl.getTopicPublishInfoTable().get(topic);
            if (tp == null || !tp.ok()) {
                throw new IllegalStateException("no publish info for the scripted route");
            }
            field(tp.getSendWhichQueue(), "random", draws);
        }

        /**
         * Takes broker's master out of the route, as a name server would after it left, and lets
         * the producer learn the route again (a new publish info, whose index the script sets).
         */
        private void unaddress(String broker) throws Exception {
            String[] f = route.clone();
            for (int i = 1; i < f.length; i++) {
                if (f[i].split(":")[0].equals(broker) && !f[i].endsWith(":noaddr")) {
                    f[i] += ":noaddr";
                }
            }
            brokers.clear();
            byAddr.clear();
            routeBody = routeBody(f);
            route = f;
            DefaultMQProducerImpl impl = producer.getDefaultMQProducerImpl();
            MQClientInstance factory = (MQClientInstance) field(impl, "mQClientFactory");
            if (!factory.updateTopicRouteInfoFromNameServer(topic)) {
                throw new IllegalStateException("the producer did not take the changed route");
            }
            tp = impl.getTopicPublishInfoTable().get(topic);
            field(tp.getSendWhichQueue(), "random", draws);
        }

        /** Starts the producer, its remoting client replaced by the scripted one. */
        private void startProducer() throws Exception {
            String id = "loop_" + ProcessHandle.current().pid();
            producer = new DefaultMQProducer(id);
            producer.setInstanceName(id);
            producer.setNamesrvAddr("127.0.0.1:1");
            producer.setVipChannelEnabled(false);
            producer.start();
            Object api = ((MQClientInstance) field(producer.getDefaultMQProducerImpl(), "mQClientFactory")).getMQClientAPIImpl();
            RemotingClient netty = (RemotingClient) field(api, "remotingClient");
            field(api, "remotingClient", scriptedClient());
            netty.shutdown();
        }

        private Object tolerance() throws ReflectiveOperationException {
            return field(field(producer.getDefaultMQProducerImpl(), "mqFaultStrategy"), "latencyFaultTolerance");
        }

        private void stop() {
            if (producer != null) {
                producer.shutdown();
                producer = null;
            }
        }

        /** The route as the name server would answer it; brokers at 10.0.0.i:10911 in order. */
        private byte[] routeBody(String[] f) throws Exception {
            Class<?> trd = routeClass("TopicRouteData");
            Class<?> qd = routeClass("QueueData");
            Class<?> bd = routeClass("BrokerData");
            List<Object> queueDatas = new ArrayList<>();
            List<Object> brokerDatas = new ArrayList<>();
            for (int i = 1; i < f.length; i++) {
                String[] p = f[i].split(":");
                String name = p[0];
                int n = Integer.parseInt(p[1]);
                brokers.add(name);
                Object q = qd.getConstructor().newInstance();
                qd.getMethod("setBrokerName", String.class).invoke(q, name);
                qd.getMethod("setWriteQueueNums", int.class).invoke(q, n);
                qd.getMethod("setReadQueueNums", int.class).invoke(q, n);
                qd.getMethod("setPerm", int.class).invoke(q, 6);
                queueDatas.add(q);
                HashMap<Long, String> addrs = new HashMap<>();
                if (p.length < 3 || !p[2].equals("noaddr")) {
                    String addr = "10.0.0." + i + ":10911";
                    addrs.put(0L, addr);
                    byAddr.put(addr, name);
                }
                Object b = bd.getConstructor().newInstance();
                bd.getMethod("setCluster", String.class).invoke(b, "c");
                bd.getMethod("setBrokerName", String.class).invoke(b, name);
                bd.getMethod("setBrokerAddrs", HashMap.class).invoke(b, addrs);
                brokerDatas.add(b);
            }
            Object route = trd.getConstructor().newInstance();
            trd.getMethod("setQueueDatas", List.class).invoke(route, queueDatas);
            trd.getMethod("setBrokerDatas", List.class).invoke(route, brokerDatas);
            return (byte[]) trd.getMethod("encode").invoke(route);
        }

        private static Class<?> routeClass(String simple) throws ClassNotFoundException {
            for (String pkg : new String[] {"org.apache.rocketmq.remoting.protocol.route.", "org.apache.rocketmq.common.protocol.route."}) {
                try {
                    return Class.forName(pkg + simple);
                } catch (ClassNotFoundException e) {
                    // the other line's package
                }
            }
            throw new ClassNotFoundException(simple);
        }

        private static boolean hasClass(String name) {
            try {
                Class.forName(name, false, Runner.class.getClassLoader());
                return true;
            } catch (ClassNotFoundException e) {
                return false;
            }
        }

        /** A RemotingClient answering route queries with the script's route and sends as its brokers. */
        private RemotingClient scriptedClient() {
            InvocationHandler h = (proxy, m, args) -> {
                switch (m.getName()) {
                    case "invokeSync":
                        return invokeSync((String) args[0], (RemotingCommand) args[1], (long) args[2]);
                    case "getNameServerAddressList":
                    case "getAvailableNameSrvList":
                        return Collections.singletonList("127.0.0.1:1");
                    case "isChannelWritable":
                    case "isAddressReachable":
                        return true;
                    case "hashCode":
                        return System.identityHashCode(proxy);
                    case "equals":
                        return proxy == args[0];
                    case "toString":
                        return "scripted remoting client";
                    default:
                        return zero(m);
                }
            };
            return (RemotingClient) Proxy.newProxyInstance(RemotingClient.class.getClassLoader(), new Class<?>[] {RemotingClient.class}, h);
        }

        private static Object zero(Method m) {
            Class<?> r = m.getReturnType();
            if (r == boolean.class) {
                return false;
            }
            if (r == int.class || r == long.class || r == short.class || r == byte.class) {
                return r == long.class ? (Object) 0L : (Object) 0;
            }
            return null;
        }

        private RemotingCommand invokeSync(String addr, RemotingCommand req, long timeoutMillis) throws Exception {
            switch (req.getCode()) {
                case GET_ROUTEINFO_BY_TOPIC:
                    // Only the episode's topic has a route: the client's periodic refresh of other
                    // topics (the default topic, earlier episodes') must not bring addresses back.
                    Object h = req.readCustomHeader();
                    if (!String.valueOf(h.getClass().getMethod("getTopic").invoke(h)).equals(topic)) {
                        throw new RemotingConnectException(String.valueOf(addr));
                    }
                    RemotingCommand r = RemotingCommand.createResponseCommand(0, null);
                    r.setBody(routeBody);
                    return r;
                case SEND_MESSAGE:
                case SEND_MESSAGE_V2:
                    return answerSend(addr, req, timeoutMillis);
                default:
                    // Heartbeats and the like: the scripted brokers take no connection for them.
                    throw new RemotingConnectException(String.valueOf(addr));
            }
        }

        private RemotingCommand answerSend(String addr, RemotingCommand req, long left) throws Exception {
            String broker = byAddr.get(addr);
            if (broker == null) {
                throw new RemotingConnectException(addr);
            }
            Object header = req.readCustomHeader();
            int queueId = (Integer) header.getClass().getMethod(req.getCode() == SEND_MESSAGE_V2 ? "getE" : "getQueueId").invoke(header);
            attempts.add(broker + "/" + queueId);
            Behaviour b = behave.getOrDefault(broker, new Behaviour("ok", 0, 0, 0));
            if (b.kind.equals("refuse")) {
                throw new RemotingConnectException(addr);
            }
            if (left <= 0 || b.kind.equals("hang") || b.latency >= left) {
                FaultScript.VirtualClock.advance(Math.max(left, 0) + b.late);
                throw new RemotingTimeoutException("scripted: " + broker + " did not answer in " + Math.max(left, 0) + " ms");
            }
            FaultScript.VirtualClock.advance(b.latency);
            switch (b.kind) {
                case "reset":
                    throw new RemotingSendRequestException(addr);
                case "code":
                    return RemotingCommand.createResponseCommand(b.code, "scripted refusal");
                case "stored":
                case "ok":
                    RemotingCommand r = RemotingCommand.createResponseCommand(b.kind.equals("ok") ? 0 : b.code, null);
                    r.addExtField("msgId", "7F00000100002A9F0000000000000000");
                    r.addExtField("queueId", String.valueOf(queueId));
                    r.addExtField("queueOffset", "0");
                    return r;
                default:
                    throw new IllegalArgumentException("unknown behaviour " + b.kind);
            }
        }

        private void send(int step) throws Exception {
            attempts.clear();
            String outcome;
            try {
                SendResult r = producer.send(new Message(topic, "x".getBytes(StandardCharsets.UTF_8)));
                outcome = "ok " + r.getSendStatus() + " " + r.getMessageQueue().getBrokerName() + "/" + r.getMessageQueue().getQueueId();
            } catch (RemotingTooMuchRequestException e) {
                outcome = String.valueOf(e.getMessage()).contains("call timeout") ? "timeout" : "failed";
            } catch (MQBrokerException e) {
                outcome = "refused " + e.getResponseCode();
            } catch (MQClientException e) {
                outcome = e.getCause() instanceof MQBrokerException
                    ? "refused " + ((MQBrokerException) e.getCause()).getResponseCode() : "failed";
            }
            out.println("{\"step\":" + step + ",\"send\":\"" + outcome + "\",\"tried\":\"" + String.join(",", attempts)
                + "\",\"index\":" + index(tp.getSendWhichQueue()) + "}");
            Object tolerance = tolerance();
            Class<?> lft = Class.forName("org.apache.rocketmq.client.latency.LatencyFaultTolerance", true, Runner.class.getClassLoader());
            for (String broker : brokers) {
                boolean available = (boolean) lft.getMethod("isAvailable", Object.class).invoke(tolerance, broker);
                boolean reachable = true;
                if (hasMethod(lft, "isReachable", Object.class)) {
                    reachable = (boolean) lft.getMethod("isReachable", Object.class).invoke(tolerance, broker);
                }
                long until = 0;
                Object item = ((Map<?, ?>) field(tolerance, "faultItemTable")).get(broker);
                if (item != null) {
                    until = (long) field(item, "startTimestamp");
                }
                out.println("{\"step\":" + step + ",\"broker\":\"" + broker + "\",\"available\":" + available
                    + ",\"reachable\":" + reachable + ",\"until\":" + until + "}");
            }
        }

        private static int index(ThreadLocalIndex idx) throws ReflectiveOperationException {
            Integer v = threadLocal(idx).get();
            return v == null ? 0 : v;
        }

        private static void setIndex(ThreadLocalIndex idx, int v) throws ReflectiveOperationException {
            threadLocal(idx).set(v);
        }

        @SuppressWarnings("unchecked")
        private static ThreadLocal<Integer> threadLocal(ThreadLocalIndex idx) throws ReflectiveOperationException {
            return (ThreadLocal<Integer>) field(idx, "threadLocalIndex");
        }

        private static Object field(Object o, String name) throws ReflectiveOperationException {
            return findField(o.getClass(), name).get(o);
        }

        private static void field(Object o, String name, Object value) throws ReflectiveOperationException {
            findField(o.getClass(), name).set(o, value);
        }

        private static Field findField(Class<?> c, String name) throws NoSuchFieldException {
            for (Class<?> k = c; k != null; k = k.getSuperclass()) {
                try {
                    Field f = k.getDeclaredField(name);
                    f.setAccessible(true);
                    return f;
                } catch (NoSuchFieldException e) {
                    // look in the superclass
                }
            }
            throw new NoSuchFieldException(c.getName() + "." + name);
        }

        private static boolean hasMethod(Class<?> c, String name, Class<?>... params) {
            try {
                return c.getMethod(name, params) != null;
            } catch (NoSuchMethodException e) {
                return false;
            }
        }
    }

    /**
     * The draws of ThreadLocalIndex.reset: the k-th value of splitmix64 from the episode's seed,
     * as the Go test's loopDraw computes it. Nothing else may draw.
     */
    static final class Draws extends Random {
        private static final long serialVersionUID = 1L;
        long seed;
        long k;

        @Override
        public int nextInt(int bound) {
            long z = seed + (k + 1) * 0x9E3779B97F4A7C15L;
            k++;
            z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
            z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
            z ^= z >>> 31;
            return (int) Long.remainderUnsigned(z >>> 33, 0x7fffffffL);
        }

        @Override
        public int nextInt() {
            throw new IllegalStateException("the script sets every index; nothing may draw one");
        }
    }
}
