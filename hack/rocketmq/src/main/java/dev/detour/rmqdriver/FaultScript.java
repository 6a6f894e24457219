package dev.detour.rmqdriver;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;

import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.common.ThreadLocalIndex;
import org.apache.rocketmq.client.impl.producer.TopicPublishInfo;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Runs a script of fault-tolerance steps against RocketMQ's own MQFaultStrategy,
 * LatencyFaultToleranceImpl and TopicPublishInfo, on a clock the script moves, and prints every
 * decision as one JSON line on stdout. The same script runs through detour's fault table and queue
 * selection in a Go test, which requires the same decisions step by step.
 *
 * <p>The classes of RocketMQ's latency package read System.currentTimeMillis. They are loaded
 * through a class loader that points those calls at {@link VirtualClock} instead (a rewrite of the
 * call's owner in the class file's constant pool), so time moves only when the script says so and
 * a run is deterministic. The per-thread indexes are set from the script and driven from one
 * thread; the random draws of ThreadLocalIndex.reset come from the script too.
 *
 * <p>The same source builds against RocketMQ 4.9.x and 5.x; the methods whose signatures differ
 * between them are called by reflection. One command per line on stdin:
 *
 * <pre>
 * begin &lt;RocketMQ5|RocketMQ4|Disabled&gt;   a new strategy; fault tolerance on unless Disabled
 * route &lt;broker&gt;:&lt;queues&gt; ...              the topic's write queues, in the order given
 * index &lt;int&gt;                                 the sending thread's queue index
 * worst &lt;int&gt;                                 the index pickOneAtLeast counts from (4.x)
 * attempt &lt;broker&gt; &lt;ms&gt; &lt;outcome&gt;           an attempt's updateFaultItem, as the sync send
 *                                             loop calls it for ok|client|interrupted|transport|broker
 * record &lt;broker&gt; &lt;ms&gt; &lt;isolation&gt; &lt;reachable&gt;   updateFaultItem with these arguments (0|1)
 * select &lt;last|-&gt; &lt;draw|-&gt;                   selectOneMessageQueue after last; a draw resets the
 *                                             index (5.x: resetIndex=true, reset draws it)
 * advance &lt;ms&gt;                                moves the clock
 * state &lt;broker&gt;                              prints the broker's item
 * </pre>
 *
 * Output: {"step":n,"pick":"broker/queue","index":i} per select (i: the thread's index after it),
 * {"step":n,"broker":b,"available":x,"reachable":y,"until":t} per state (until is the item's
 * startTimestamp, 0 without an item), and {"done":true,"steps":n} at the end. Steps are counted
 * over all input lines, from 1.
 */
public final class FaultScript {
    private FaultScript() {
    }

    /** Names of the classes the rewriting loader defines itself. */
    private static final String[] OWN = {"org.apache.rocketmq.client.latency.", "dev.detour.rmqdriver.FaultScript"};

    /** The classes whose clock the script must move: each must read System.currentTimeMillis. */
    private static final String[] CLOCKED = {"org.apache.rocketmq.client.latency.LatencyFaultToleranceImpl",
        "org.apache.rocketmq.client.latency.LatencyFaultToleranceImpl$FaultItem"};

    public static void main(String[] args) throws Exception {
        System.exit(runThrough(Runner.class.getName(), new ClockLoader(FaultScript.class.getClassLoader(), OWN, clocked(CLOCKED))));
    }

    /**
     * The classes that must run on the script's clock: given ones, and the one the system
     * property detour.clocked names (a test names a class without a clock call, which must fail).
     */
    static String[] clocked(String[] given) {
        String extra = System.getProperty("detour.clocked", "");
        if (extra.isEmpty()) {
            return given;
        }
        String[] all = java.util.Arrays.copyOf(given, given.length + 1);
        all[given.length] = extra;
        return all;
    }

    /**
     * Runs runnerClass's static run(InputStream, PrintStream) as loader defines it, then checks that
     * loader rewrote the clock of every class it must have.
     */
    static int runThrough(String runnerClass, ClockLoader loader) throws Exception {
        // Every class that must run on the script's clock is defined (and so rewritten) now,
        // even when a script never reaches it (no fault item without fault tolerance).
        loader.defineClocked();
        Class<?> runner = Class.forName(runnerClass, true, loader);
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, "UTF-8");
        int code;
        try {
            code = (int) runner.getMethod("run", InputStream.class, PrintStream.class).invoke(null, System.in, out);
        } catch (InvocationTargetException e) {
            out.flush();
            throw (Exception) e.getCause();
        }
        out.flush();
        loader.checkRewritten();
        return code;
    }

    /** The clock the rewritten classes read: milliseconds that move only when the script says. */
    public static final class VirtualClock {
        private static long now = 1_700_000_000_000L;

        private VirtualClock() {
        }

        public static long currentTimeMillis() {
            return now;
        }

        static void advance(long ms) {
            now += ms;
        }
    }

    /**
     * Loads the classes named by its prefixes (RocketMQ's and the driver's own) with every call of
     * System.currentTimeMillis() turned into VirtualClock.currentTimeMillis(); everything else
     * comes from the parent. It fails loudly rather than leave a class on the real clock: defining
     * a class it must rewrite that has no such call throws, and so does checkRewritten for one
     * it never defined.
     */
    static final class ClockLoader extends ClassLoader {
        private final String[] own;
        private final java.util.Set<String> clocked;
        private final java.util.Set<String> rewritten = java.util.concurrent.ConcurrentHashMap.newKeySet();

        ClockLoader(ClassLoader parent, String[] own, String[] clocked) {
            super(parent);
            this.own = own;
            this.clocked = java.util.Set.of(clocked);
        }

        /** Defines every class that must run on the virtual clock. */
        void defineClocked() throws ClassNotFoundException {
            for (String c : clocked) {
                if (!own(c)) {
                    throw new IllegalStateException("the clock rewrite does not load " + c + ": its time would not be the script's");
                }
                Class.forName(c, false, this);
            }
        }

        /** Throws unless every class that must run on the virtual clock was rewritten. */
        void checkRewritten() {
            for (String c : clocked) {
                if (!rewritten.contains(c)) {
                    throw new IllegalStateException("the clock rewrite never rewrote " + c + ": the script did not drive its time");
                }
            }
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                if (c == null && own(name)) {
                    c = define(name);
                }
                if (c == null) {
                    return super.loadClass(name, resolve);
                }
                if (resolve) {
                    resolveClass(c);
                }
                return c;
            }
        }

        private boolean own(String name) {
            for (String p : own) {
                if (name.startsWith(p)) {
                    return true;
                }
            }
            return false;
        }

        private Class<?> define(String name) throws ClassNotFoundException {
            String res = name.replace('.', '/') + ".class";
            try (InputStream in = getParent().getResourceAsStream(res)) {
                if (in == null) {
                    return null;
                }
                ByteArrayOutputStream buf = new ByteArrayOutputStream();
                in.transferTo(buf);
                byte[] b = ClockRewrite.rewrite(buf.toByteArray(), VirtualClock.class.getName().replace('.', '/'));
                if (b == null) {
                    if (clocked.contains(name)) {
                        throw new IllegalStateException("the clock rewrite found no call of System.currentTimeMillis() in "
                            + name + ": its time would not be the script's");
                    }
                    b = buf.toByteArray();
                } else {
                    rewritten.add(name);
                }
                return defineClass(name, b, 0, b.length);
            } catch (IOException e) {
                throw new ClassNotFoundException(name, e);
            }
        }
    }

    /**
     * Points the Methodref entries of System.currentTimeMillis at another class's method of that
     * name; null when the class has none.
     */
    static final class ClockRewrite {
        private ClockRewrite() {
        }

        static byte[] rewrite(byte[] b, String clockClass) {
            int count = u2(b, 8);
            int[] tag = new int[count];
            int[] pos = new int[count];
            int p = 10;
            for (int i = 1; i < count; i++) {
                tag[i] = b[p] & 0xff;
                pos[i] = p;
                switch (tag[i]) {
                    case 1: p += 3 + u2(b, p + 1); break;
                    case 3: case 4: p += 5; break;
                    case 5: case 6: p += 9; i++; break;
                    case 7: case 8: case 16: case 19: case 20: p += 3; break;
                    case 9: case 10: case 11: case 12: case 17: case 18: p += 5; break;
                    case 15: p += 4; break;
                    default: throw new IllegalStateException("constant pool tag " + tag[i]);
                }
            }
            int end = p;
            List<Integer> patch = new ArrayList<>();
            for (int i = 1; i < count; i++) {
                if (tag[i] != 10) {
                    continue;
                }
                int cls = u2(b, pos[i] + 1);
                int nat = u2(b, pos[i] + 3);
                if (utf8(b, pos, tag, u2(b, pos[cls] + 1)).equals("java/lang/System")
                        && utf8(b, pos, tag, u2(b, pos[nat] + 1)).equals("currentTimeMillis")
                        && utf8(b, pos, tag, u2(b, pos[nat] + 3)).equals("()J")) {
                    patch.add(i);
                }
            }
            if (patch.isEmpty()) {
                return null;
            }
            byte[] name = clockClass.getBytes(StandardCharsets.UTF_8);
            ByteArrayOutputStream out = new ByteArrayOutputStream(b.length + name.length + 6);
            out.write(b, 0, 8);
            out.write((count + 2) >> 8);
            out.write(count + 2);
            byte[] pool = java.util.Arrays.copyOfRange(b, 10, end);
            for (int i : patch) {
                int at = pos[i] + 1 - 10;
                pool[at] = (byte) ((count + 1) >> 8);
                pool[at + 1] = (byte) (count + 1);
            }
            out.write(pool, 0, pool.length);
            out.write(1); // CONSTANT_Utf8 at index count: the clock's internal name
            out.write(name.length >> 8);
            out.write(name.length);
            out.write(name, 0, name.length);
            out.write(7); // CONSTANT_Class at index count+1, naming it
            out.write(count >> 8);
            out.write(count);
            out.write(b, end, b.length - end);
            return out.toByteArray();
        }

        private static int u2(byte[] b, int p) {
            return ((b[p] & 0xff) << 8) | (b[p + 1] & 0xff);
        }

        private static String utf8(byte[] b, int[] pos, int[] tag, int i) {
            if (tag[i] != 1) {
                return "";
            }
            return new String(b, pos[i] + 3, u2(b, pos[i] + 1), StandardCharsets.UTF_8);
        }
    }

    /** Runs the script; loaded by ClockLoader, so the latency classes it touches read VirtualClock. */
    public static final class Runner {
        private final PrintStream out;
        private final boolean v5;
        private Object strategy;
        private Object tolerance;
        private TopicPublishInfo tp;
        private final DrawnRandom draws = new DrawnRandom();
        private boolean rocketmq4;

        private Runner(PrintStream out) throws ReflectiveOperationException {
            this.out = out;
            Class<?> s = strategyClass();
            this.v5 = hasMethod(s, "selectOneMessageQueue", TopicPublishInfo.class, String.class, boolean.class);
        }

        public static int run(InputStream in, PrintStream out) throws Exception {
            Runner r = new Runner(out);
            BufferedReader rd = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
            int step = 0;
            for (String line; (line = rd.readLine()) != null; ) {
                step++;
                line = line.trim();
                if (line.isEmpty() || line.startsWith("#")) {
                    continue;
                }
                try {
                    r.exec(step, line.split("\\s+"));
                } catch (Exception e) {
                    throw new IllegalStateException("step " + step + " (" + line + ")", e);
                }
            }
            out.println("{\"done\":true,\"steps\":" + step + "}");
            return 0;
        }

        private void exec(int step, String[] f) throws Exception {
            switch (f[0]) {
                case "begin":
                    begin(f[1]);
                    break;
                case "route":
                    route(f);
                    break;
                case "index":
                    setIndex(tp.getSendWhichQueue(), Integer.parseInt(f[1]));
                    break;
                case "worst":
                    setIndex((ThreadLocalIndex) field(tolerance, "whichItemWorst"), Integer.parseInt(f[1]));
                    break;
                case "attempt":
                    attempt(f[1], Long.parseLong(f[2]), f[3]);
                    break;
                case "record":
                    update(f[1], Long.parseLong(f[2]), f[3].equals("1"), f[4].equals("1"));
                    break;
                case "select":
                    select(step, f[1].equals("-") ? null : f[1], f[2]);
                    break;
                case "advance":
                    VirtualClock.advance(Long.parseLong(f[1]));
                    break;
                case "state":
                    state(step, f[1]);
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + f[0]);
            }
        }

        private static Class<?> strategyClass() throws ClassNotFoundException {
            return Class.forName("org.apache.rocketmq.client.latency.MQFaultStrategy", true,
                Runner.class.getClassLoader());
        }

        private void begin(String preset) throws Exception {
            Class<?> s = strategyClass();
            if (v5) {
                Class<?> resolver = Class.forName("org.apache.rocketmq.client.latency.Resolver", true, s.getClassLoader());
                Class<?> detector = Class.forName("org.apache.rocketmq.client.latency.ServiceDetector", true, s.getClassLoader());
                Constructor<?> c = s.getConstructor(ClientConfig.class, resolver, detector);
                strategy = c.newInstance(new ClientConfig(), null, null);
            } else {
                strategy = s.getConstructor().newInstance();
            }
            boolean enabled;
            switch (preset) {
                case "RocketMQ5":
                    if (!v5) {
                        throw new IllegalArgumentException("RocketMQ5 needs a 5.x client");
                    }
                    enabled = true;
                    break;
                case "RocketMQ4":
                    if (v5) {
                        throw new IllegalArgumentException("RocketMQ4 needs a 4.x client");
                    }
                    enabled = true;
                    break;
                case "Disabled":
                    enabled = false;
                    break;
                default:
                    throw new IllegalArgumentException("unknown preset " + preset);
            }
            rocketmq4 = !v5;
            s.getMethod("setSendLatencyFaultEnable", boolean.class).invoke(strategy, enabled);
            tolerance = field(strategy, "latencyFaultTolerance");
            tp = null;
        }

        private void route(String[] f) throws Exception {
            tp = new TopicPublishInfo();
            List<MessageQueue> queues = new ArrayList<>();
            List<Object> datas = new ArrayList<>();
            Class<?> qd = routeClass("QueueData");
            for (int i = 1; i < f.length; i++) {
                String[] bq = f[i].split(":");
                int n = Integer.parseInt(bq[1]);
                for (int q = 0; q < n; q++) {
                    queues.add(new MessageQueue("T", bq[0], q));
                }
                Object d = qd.getConstructor().newInstance();
                qd.getMethod("setBrokerName", String.class).invoke(d, bq[0]);
                qd.getMethod("setWriteQueueNums", int.class).invoke(d, n);
                qd.getMethod("setReadQueueNums", int.class).invoke(d, n);
                qd.getMethod("setPerm", int.class).invoke(d, 6);
                datas.add(d);
            }
            tp.setMessageQueueList(queues);
            Class<?> trd = routeClass("TopicRouteData");
            Object route = trd.getConstructor().newInstance();
            trd.getMethod("setQueueDatas", List.class).invoke(route, datas);
            TopicPublishInfo.class.getMethod("setTopicRouteData", trd).invoke(tp, route);
            tp.setHaveTopicRouterInfo(true);
            field(tp.getSendWhichQueue(), "random", draws);
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

        /** The arguments DefaultMQProducerImpl.sendDefaultImpl passes for a sync attempt's outcome. */
        private void attempt(String broker, long latency, String outcome) throws Exception {
            boolean isolation;
            boolean reachable;
            switch (outcome) {
                case "ok":
                case "interrupted":
                    isolation = false;
                    reachable = true;
                    break;
                case "client":
                    isolation = rocketmq4; // 4.x isolates an MQClientException, 5.x does not
                    reachable = true;
                    break;
                case "transport":
                    isolation = true;
                    reachable = true; // the detector is off
                    break;
                case "broker":
                    isolation = true;
                    reachable = false;
                    break;
                default:
                    throw new IllegalArgumentException("unknown outcome " + outcome);
            }
            update(broker, latency, isolation, reachable);
        }

        private void update(String broker, long latency, boolean isolation, boolean reachable) throws Exception {
            if (v5) {
                strategy.getClass().getMethod("updateFaultItem", String.class, long.class, boolean.class, boolean.class)
                    .invoke(strategy, broker, latency, isolation, reachable);
            } else {
                strategy.getClass().getMethod("updateFaultItem", String.class, long.class, boolean.class)
                    .invoke(strategy, broker, latency, isolation);
            }
        }

        private void select(int step, String last, String draw) throws Exception {
            MessageQueue mq;
            if (v5) {
                boolean reset = !draw.equals("-");
                if (reset) {
                    draws.next = Integer.parseInt(draw);
                }
                mq = (MessageQueue) strategy.getClass()
                    .getMethod("selectOneMessageQueue", TopicPublishInfo.class, String.class, boolean.class)
                    .invoke(strategy, tp, last, reset);
            } else {
                mq = (MessageQueue) strategy.getClass().getMethod("selectOneMessageQueue", TopicPublishInfo.class, String.class)
                    .invoke(strategy, tp, last);
            }
            out.println("{\"step\":" + step + ",\"pick\":\"" + mq.getBrokerName() + "/" + mq.getQueueId()
                + "\",\"index\":" + index(tp.getSendWhichQueue()) + "}");
        }

        private void state(int step, String broker) throws Exception {
            Class<?> lft = Class.forName("org.apache.rocketmq.client.latency.LatencyFaultTolerance", true,
                strategy.getClass().getClassLoader());
            boolean available = (boolean) lft.getMethod("isAvailable", Object.class).invoke(tolerance, broker);
            boolean reachable = true;
            if (v5) {
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
            Field f = findField(o.getClass(), name);
            return f.get(o);
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
                Method m = c.getMethod(name, params);
                return m != null;
            } catch (NoSuchMethodException e) {
                return false;
            }
        }
    }

    /** A Random whose bounded draws are the script's: what ThreadLocalIndex.reset takes. */
    static final class DrawnRandom extends Random {
        private static final long serialVersionUID = 1L;
        int next;

        @Override
        public int nextInt(int bound) {
            return next;
        }

        @Override
        public int nextInt() {
            throw new IllegalStateException("the script sets every index; nothing may draw one");
        }
    }
}
