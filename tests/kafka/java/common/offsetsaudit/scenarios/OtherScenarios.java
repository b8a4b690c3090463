package offsetsaudit.scenarios;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/** Transactional commits, protocol migrations, and groups left for kafka-consumer-groups to act on. */
final class OtherScenarios {
    private OtherScenarios() {
    }

    private static final Duration WAIT = Duration.ofSeconds(60);

    /** A consume-transform-produce loop: offsets committed with sendOffsetsToTransaction in one committed and
     *  one aborted transaction (the group's committed offset is the first one's), and a committed transaction
     *  for a group without members (a ConsumerGroupMetadata of the group id only). */
    static void transactions(Scenarios.Context context) throws Exception {
        int partitions = 2;
        String input = context.topic("in", partitions);
        String output = context.topic("out", partitions);
        context.produce(input, partitions, 10);
        String group = context.group("group", "consumer");
        String simple = context.group("simple", "consumer");
        Properties props = context.consumer(group, "consumer");
        props.put("isolation.level", "read_committed");
        props.put("client.id", context.name("app"));
        Properties producerProps = Scenarios.producerProps(context.bootstrap);
        producerProps.put("transactional.id", context.name("txn"));
        producerProps.put("enable.idempotence", "true");
        producerProps.put("transaction.timeout.ms", "20000");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps)) {
            producer.initTransactions();
            Member member = context.hold(Member.subscribed("app", props, List.of(input)));
            member.awaitAssignment(owned -> owned.size() == partitions, WAIT);
            member.awaitCaughtUp(WAIT);
            for (int round = 0; round < 2; round++) {
                boolean commit = round == 0;
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (int p = 0; p < partitions; p++) {
                    offsets.put(new TopicPartition(input, p), new OffsetAndMetadata(commit ? 6 : 10, "round-" + round));
                }
                // A commit refused for a stale member epoch (the group moved on, e.g. over a broker restart) is
                // what an application answers by aborting and retrying with the consumer's current metadata.
                for (int attempt = 1; ; attempt++) {
                    ConsumerGroupMetadata metadata = member.call(KafkaConsumer::groupMetadata);
                    producer.beginTransaction();
                    try {
                        producer.send(new ProducerRecord<>(output, 0, null, ("round-" + round).getBytes(StandardCharsets.UTF_8)));
                        producer.sendOffsetsToTransaction(offsets, metadata);
                        if (commit) {
                            producer.commitTransaction();
                        } else {
                            producer.abortTransaction();
                        }
                        break;
                    } catch (org.apache.kafka.common.KafkaException refused) {
                        if (attempt >= 10 || !(Member.retriable(refused) || Member.retriable(refused.getCause()))) {
                            throw refused;
                        }
                        producer.abortTransaction();
                        Scenarios.sleep(500);
                    }
                }
            }
            // a group no consumer is in: the producer commits for it by id (a simple group)
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(output, 1, null, "simple".getBytes(StandardCharsets.UTF_8)));
            producer.sendOffsetsToTransaction(Map.of(new TopicPartition(input, 1), new OffsetAndMetadata(3)),
                new ConsumerGroupMetadata(simple));
            producer.commitTransaction();
        }
    }

    private static Properties classic(Scenarios.Context context, String group, String client) {
        Properties props = context.consumer(group, "classic");
        props.put("partition.assignment.strategy", RangeAssignor.class.getName());
        props.put("client.id", context.name(client));
        return props;
    }

    private static Properties modern(Scenarios.Context context, String group, String client) {
        Properties props = context.consumer(group, "consumer");
        props.put("client.id", context.name(client));
        return props;
    }

    /** Online migration between the protocols: a classic group upgraded to a consumer group when a member
     *  with group.protocol=consumer joins it (held with a classic and a consumer member), and a second group
     *  upgraded and then downgraded back to classic when its last consumer-protocol member leaves. */
    static void migration(Scenarios.Context context) throws Exception {
        int partitions = 4;
        String topic = context.topic("in", partitions);
        context.produce(topic, partitions, 6);
        String upgraded = context.group("upgraded", "consumer");
        String downgraded = context.group("downgraded", "consumer");
        for (String group : List.of(upgraded, downgraded)) {
            Member c1 = context.hold(Member.subscribed("c1", classic(context, group, "c1"), List.of(topic)));
            Member c2 = context.hold(Member.subscribed("c2", classic(context, group, "c2"), List.of(topic)));
            context.awaitStable(group, 2, List.of(c1, c2), partitions);
            c1.awaitCaughtUp(WAIT);
            c2.awaitCaughtUp(WAIT);
            c1.commit();
            c2.commit();
            Member n1 = context.hold(Member.subscribed("n1", modern(context, group, "n1"), List.of(topic)));
            context.awaitStable(group, 3, List.of(c1, c2, n1), partitions);
            context.release(c1);
            context.awaitStable(group, 2, List.of(c2, n1), partitions);
            n1.commit();
            c2.commit();
            if (group.equals(downgraded)) {
                Member c3 = context.hold(Member.subscribed("c3", classic(context, group, "c3"), List.of(topic)));
                context.awaitStable(group, 3, List.of(c2, n1, c3), partitions);
                context.release(n1);
                context.awaitStable(group, 2, List.of(c2, c3), partitions);
                c3.commit();
            }
        }
    }

    /** Groups with committed offsets and no members, which the test then changes with kafka-consumer-groups:
     *  offsets deleted for one topic (a classic group), a consumer group deleted, an offset reset of an empty
     *  group; and a simple group (offsets committed by a consumer with assigned partitions). */
    static void adminGroups(Scenarios.Context context) throws Exception {
        int partitions = 2;
        String first = context.topic("first", partitions);
        String second = context.topic("second", partitions);
        context.produce(first, partitions, 5);
        context.produce(second, partitions, 5);
        String[][] groups = {
            {context.group("delete-offsets", "consumer"), "classic"},
            {context.group("deleted", "consumer"), "consumer"},
            {context.group("reset", "consumer"), "classic"},
        };
        for (String[] entry : groups) {
            Properties props = context.consumer(entry[0], entry[1]);
            props.put("client.id", context.name("client"));
            Member member = Member.subscribed("admin", props, List.of(first, second));
            member.awaitAssignment(owned -> owned.size() == 2 * partitions, WAIT);
            member.awaitCaughtUp(WAIT);
            // the topics' end offsets, named: a commit of the consumed positions retried while a classic member
            // rejoins after a broker restart would commit nothing (it owns no partitions then)
            java.util.Set<TopicPartition> both = new java.util.HashSet<>(Scenarios.partitions(first, partitions));
            both.addAll(Scenarios.partitions(second, partitions));
            Map<TopicPartition, Long> ends = member.call(c -> c.endOffsets(both));
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            ends.forEach((tp, end) -> offsets.put(tp, new OffsetAndMetadata(end)));
            member.commit(offsets);
            member.close();
        }
        String simple = context.group("simple", "consumer");
        Properties props = context.consumer(simple, "classic");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(Scenarios.partitions(first, partitions));
            consumer.commitSync(Map.of(new TopicPartition(first, 0), new OffsetAndMetadata(2, "simple"),
                new TopicPartition(first, 1), new OffsetAndMetadata(4)));
        }
        context.note("delete-offsets-topic=" + first);
        context.note("reset-topic=" + second);
    }
}
