package offsetsaudit.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.requests.TransactionResult;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.image.MetadataDelta;

import java.io.File;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Loads segment folders into fresh shards the way {@code CoordinatorLoaderImpl} loads a partition when its
 * coordinator starts: every data record deserialized with {@code GroupCoordinatorRecordSerde} and replayed at its
 * offset with its batch's producer id and epoch, every transaction marker replayed as a commit or an abort, records
 * of unknown types skipped; then {@code onLoaded} with the cluster's metadata image. Prints what Kafka then answers.
 */
final class Replayer {
    private Replayer() { }

    static void main(String[] args, PrintStream out) throws Exception {
        List<String> positional = new ArrayList<>();
        boolean epochs = false;
        JsonNode brokerConfigs = Coordinator.JSON.objectNode();
        for (int i = 1; i < args.length; i++) {
            if (args[i].equals("--epochs")) epochs = true;
            else if (args[i].equals("--broker-configs")) brokerConfigs = Main.MAPPER.readTree(new File(args[++i]));
            else positional.add(args[i]);
        }
        if (positional.isEmpty()) throw new IllegalArgumentException("replay DIR [TOPICS.json] [--epochs]");
        File root = new File(positional.get(0));
        Map<String, JsonNode> topics = new LinkedHashMap<>();
        if (positional.size() > 1) {
            JsonNode snapshot = Main.MAPPER.readTree(new File(positional.get(1)));
            JsonNode list = snapshot.isArray() ? snapshot : snapshot.path("topics");
            List<JsonNode> entries = new ArrayList<>();
            list.forEach(entries::add);
            entries.sort((a, b) -> Long.compare(a.path("valid_from_ms").asLong(0), b.path("valid_from_ms").asLong(0)));
            for (JsonNode t : entries) topics.put(t.get("name").asText(), t);
        }
        File[] folders = root.listFiles((dir, name) -> name.startsWith("__consumer_offsets-"));
        if (folders == null) throw new IllegalArgumentException(root + " is not a folder");
        java.util.Arrays.sort(folders, (a, b) -> Integer.compare(partitionOf(a), partitionOf(b)));
        for (File folder : folders) {
            int partition = partitionOf(folder);
            Map<String, Object> props = Defaults.brokerProps();
            JsonNode own = brokerConfigs.has(String.valueOf(partition)) ? brokerConfigs.get(String.valueOf(partition))
                : brokerConfigs.path("*");
            own.fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
            ObjectNode state = replay(folder, partition, topics, epochs, props);
            out.println(Main.MAPPER.writeValueAsString(state));
        }
    }

    static int partitionOf(File folder) {
        return Integer.parseInt(folder.getName().substring(folder.getName().lastIndexOf('-') + 1));
    }

    /**
     * One partition's state after loading; with {@code epochs}, also the loaded coordinator's view of the groups each
     * data batch touched, right after that batch (the timeline a coordinator that failed over there would start from).
     */
    static ObjectNode replay(File folder, int partition, Map<String, JsonNode> topics, boolean epochs,
                             Map<String, Object> brokerProps) throws Exception {
        File[] segments = folder.listFiles((dir, name) -> name.endsWith(".log"));
        java.util.Arrays.sort(segments);
        List<LogBatch> batches = new ArrayList<>();
        for (File segment : segments) batches.addAll(SegmentLog.readSegment(segment));
        long lastTime = 0;
        for (LogBatch b : batches) lastTime = Math.max(lastTime, b.maxTimestamp);
        long firstTime = batches.isEmpty() ? 0 : batches.get(0).maxTimestamp;
        Coordinator coordinator = new Coordinator(partition, brokerProps, firstTime, "none", false, null);
        long skipped = 0;
        long replayed = 0;
        com.fasterxml.jackson.databind.node.ArrayNode timeline = Coordinator.JSON.arrayNode();
        for (LogBatch b : batches) {
            java.util.Set<String> touched = new java.util.LinkedHashSet<>();
            if (b.control) {
                coordinator.shard.replayEndTransactionMarker(b.producerId, b.producerEpoch,
                    "COMMIT".equals(b.controlType) ? TransactionResult.COMMIT : TransactionResult.ABORT);
            } else {
                for (byte[][] r : b.records) {
                    CoordinatorRecord record;
                    try {
                        record = coordinator.serde.deserialize(ByteBuffer.wrap(r[0]), r[1] == null ? null : ByteBuffer.wrap(r[1]));
                    } catch (RuntimeException e) {
                        skipped++;
                        continue;
                    }
                    coordinator.shard.replay(ByteBuffer.wrap(r[2]).getLong(), b.producerId, b.producerEpoch, record);
                    replayed++;
                    if (epochs) touched.add(Coordinator.groupOf(record));
                }
            }
            coordinator.nextOffset = b.lastOffset + 1;
            Compat.idempotentCreateSnapshot(coordinator.registry, coordinator.nextOffset);
            if (epochs && !b.control) {
                coordinator.clock.advanceTo(b.maxTimestamp);
                timeline.add(coordinator.epochsLine(b.baseOffset, b.lastOffset, touched));
            }
        }
        coordinator.clock.advanceTo(lastTime);
        Cluster cluster = new Cluster();
        MetadataDelta delta = cluster.newDelta();
        for (JsonNode t : topics.values()) {
            cluster.createTopic(delta, t.get("name").asText(), Uuid.fromString(t.get("id").asText()),
                t.get("partitions").asInt(), null);
        }
        Compat.onLoaded(coordinator.shard, cluster.apply(delta));
        ObjectNode state = coordinator.state();
        state.put("records_replayed", replayed);
        state.put("records_skipped", skipped);
        if (epochs) state.set("epochs", timeline);
        return state;
    }
}
