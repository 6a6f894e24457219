import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.rocketmq.client.producer.selector.SelectMessageQueueByHash;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Runs RocketMQ's SelectMessageQueueByHash, the selector of ordered sends by a key, for the
 * differential test of detour's message groups. Run in source-file mode with the client's class
 * path. Reads lines "queues TAB hex of the group's UTF-8 bytes" and prints, per line, the queue id
 * the selector picks among that many queues 0..queues-1.
 */
public class SelectByHash {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        SelectMessageQueueByHash selector = new SelectMessageQueueByHash();
        Message msg = new Message("T", new byte[] {1});
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.split("\t", 2);
            int n = Integer.parseInt(f[0]);
            String group = new String(unhex(f.length > 1 ? f[1] : ""), StandardCharsets.UTF_8);
            List<MessageQueue> mqs = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                mqs.add(new MessageQueue("T", "b", i));
            }
            out.append(selector.select(mqs, msg, group).getQueueId()).append('\n');
        }
        System.out.print(out);
    }

    private static byte[] unhex(String s) {
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return b;
    }
}
