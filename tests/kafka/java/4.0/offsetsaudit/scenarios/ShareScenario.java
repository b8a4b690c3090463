package offsetsaudit.scenarios;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** A KIP-932 share group: two share consumers join and consume, one leaves; one is held. */
public final class ShareScenario implements Scenarios.Scenario {

    /** A share consumer polled (and its records acknowledged) by a thread of its own. */
    private static final class ShareMember implements AutoCloseable {
        private final KafkaShareConsumer<byte[], byte[]> consumer;
        private final Thread thread;
        private volatile boolean running = true;
        private volatile Throwable failure;
        volatile long consumed;

        ShareMember(Properties props, String topic) {
            consumer = new KafkaShareConsumer<>(props);
            thread = new Thread(() -> {
                try {
                    consumer.subscribe(List.of(topic));
                    while (running) {
                        consumed += consumer.poll(Duration.ofMillis(50)).count();
                        consumer.commitSync();
                    }
                } catch (org.apache.kafka.common.errors.WakeupException woken) {
                    // closing
                } catch (Throwable error) {
                    failure = error;
                }
            }, "share-member");
            thread.setDaemon(true);
            thread.start();
        }

        @Override
        public void close() throws Exception {
            running = false;
            thread.join(30_000);
            consumer.close();
            if (failure != null) {
                throw new IllegalStateException("share member failed", failure);
            }
        }
    }

    @Override
    public void run(Scenarios.Context context) throws Exception {
        int partitions = 3;
        String topic = context.topic("in", partitions);
        String group = context.group("group", "share");
        Properties props = Scenarios.clientProps(context.bootstrap);
        props.put("group.id", group);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("client.id", context.name("a"));
        ShareMember a = context.hold(new ShareMember(props, topic));
        awaitShareStable(context, group, 1);
        Properties propsB = (Properties) props.clone();
        propsB.put("client.id", context.name("b"));
        ShareMember b = context.hold(new ShareMember(propsB, topic));
        awaitShareStable(context, group, 2);
        context.produce(topic, partitions, 10);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (a.consumed + b.consumed < 3 * 10 && System.nanoTime() < deadline) {
            Scenarios.sleep(50);
        }
        context.release(b);
        awaitShareStable(context, group, 1);
    }

    static void awaitShareStable(Scenarios.Context context, String group, int members) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        String last = "";
        while (System.nanoTime() < deadline) {
            try {
                ShareGroupDescription description = context.admin.describeShareGroups(List.of(group))
                    .describedGroups().get(group).get(30, TimeUnit.SECONDS);
                List<Integer> sizes = new ArrayList<>();
                description.members().forEach(m -> sizes.add(m.assignment().topicPartitions().size()));
                last = description.groupState() + " members=" + sizes;
                if (description.groupState() == GroupState.STABLE && description.members().size() == members
                        && sizes.stream().allMatch(size -> size > 0)) {
                    return;
                }
            } catch (Exception retry) {
                last = retry.toString();
            }
            Scenarios.sleep(100);
        }
        throw new IllegalStateException(group + " did not become stable: " + last);
    }
}
