package offsetsaudit.scenarios;

import java.nio.file.Files;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

/** A Kafka Streams application on the KIP-1071 streams protocol (group.protocol=streams): a stateless
 *  sub-topology and a counting one with a changelog; one instance starts, a second joins; both are held. */
public final class StreamsScenario implements Scenarios.Scenario {

    @Override
    public void run(Scenarios.Context context) throws Exception {
        int partitions = 4;
        String input = context.topic("in", partitions);
        String output = context.topic("out", partitions);
        String counts = context.topic("counts", partitions);
        context.produce(input, partitions, 10);
        String application = context.group("app", "streams");
        KafkaStreams first = context.hold(start(context, application, input, output, counts, "1"));
        awaitStreamsStable(context, application, 1);
        KafkaStreams second = context.hold(start(context, application, input, output, counts, "2"));
        awaitStreamsStable(context, application, 2);
        context.produce(input, partitions, 5);
        // both instances commit what they processed (commit.interval.ms), then nothing is left to commit
        Scenarios.sleep(1500);
        awaitStreamsStable(context, application, 2);
    }

    private static KafkaStreams start(Scenarios.Context context, String application, String input, String output,
                                      String counts, String instance) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, application);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, context.bootstrap);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.STATE_DIR_CONFIG,
            Files.createTempDirectory(context.out, "streams-" + instance + "-").toString());
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        props.put(StreamsConfig.CLIENT_ID_CONFIG, context.name("instance-" + instance));
        props.put(StreamsConfig.consumerPrefix("metadata.max.age.ms"), "1000");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        StreamsBuilder builder = new StreamsBuilder();
        var records = builder.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()));
        records.mapValues(value -> value).to(output, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
        records.groupByKey().count().toStream().mapValues(String::valueOf)
            .to(counts, Produced.with(Serdes.ByteArray(), Serdes.String()));
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.start();
        return streams;
    }

    static void awaitStreamsStable(Scenarios.Context context, String group, int members) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        String last = "";
        while (System.nanoTime() < deadline) {
            try {
                StreamsGroupDescription description = context.admin.describeStreamsGroups(List.of(group))
                    .describedGroups().get(group).get(30, TimeUnit.SECONDS);
                boolean reconciled = description.members().stream().allMatch(m -> m.assignment().equals(m.targetAssignment())
                    && m.memberEpoch() == description.targetAssignmentEpoch());
                last = description.groupState() + " members=" + description.members().size() + " reconciled=" + reconciled;
                if (description.groupState() == GroupState.STABLE && description.members().size() == members && reconciled) {
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
