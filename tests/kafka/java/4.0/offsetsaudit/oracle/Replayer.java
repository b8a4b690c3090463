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
 *
 * <p>{@code --golden STATE.json} remakes a golden history's stored files from its log: the stored state names the
 * inputs (its topics, its clock at the end, the groups it described and fetched offsets of, in that order) and Kafka's
 * answers are put in place of the stored ones, in Kafka's own order, printed as the files hold them
 * ({@code golden_state}, {@code golden_epochs}).
 */
final class Replayer {
    private Replayer() { }

    /** The fields of a golden history's stored state that are the writer's inputs, not Kafka's answers. */
    private static final java.util.Set<String> INPUTS = java.util.Set.of("topics", "events", "events_omitted");

    static void main(String[] args, PrintStream out) throws Exception {
        List<String> positional = new ArrayList<>();
        boolean epochs = false;
        JsonNode brokerConfigs = Coordinator.JSON.objectNode();
        JsonNode golden = null;
        for (int i = 1; i < args.length; i++) {
            if (args[i].equals("--epochs")) epochs = true;
            else if (args[i].equals("--golden")) golden = Main.MAPPER.readTree(new File(args[++i]));
            else if (args[i].equals("--broker-configs")) brokerConfigs = Main.MAPPER.readTree(new File(args[++i]));
            else positional.add(args[i]);
        }
        if (positional.isEmpty()) throw new IllegalArgumentException("replay DIR [TOPICS.json] [--epochs]");
        File root = new File(positional.get(0));
        Map<String, JsonNode> topics = new LinkedHashMap<>();
        if (positional.size() > 1 || golden != null) {
            JsonNode snapshot = positional.size() > 1 ? Main.MAPPER.readTree(new File(positional.get(1))) : golden;
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
            ObjectNode state = replay(folder, partition, topics, epochs || golden != null, props, golden);
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
        return replay(folder, partition, topics, epochs, brokerProps, null);
    }

    /** {@link #replay}, remaking the golden history whose stored state is {@code golden} when it is not null. */
    static ObjectNode replay(File folder, int partition, Map<String, JsonNode> topics, boolean epochs,
                             Map<String, Object> brokerProps, JsonNode golden) throws Exception {
        File[] segments = folder.listFiles((dir, name) -> name.endsWith(".log"));
        java.util.Arrays.sort(segments);
        List<LogBatch> batches = new ArrayList<>();
        for (File segment : segments) batches.addAll(SegmentLog.readSegment(segment));
        long lastTime = 0;
        for (LogBatch b : batches) lastTime = Math.max(lastTime, b.maxTimestamp);
        long firstTime = batches.isEmpty() ? 0 : batches.get(0).maxTimestamp;
        Coordinator coordinator = new Coordinator(partition, brokerProps, firstTime, "none", false, null);
        if (golden != null) {
            coordinator.memberTable = false;
            // the writer's clock when it asked for the answers (a timer may have run after the last record)
            lastTime = Math.max(lastTime, golden.path("final_time_ms").asLong(lastTime));
        }
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
        ObjectNode state = golden == null ? coordinator.state() : coordinator.state(false, golden);
        if (golden != null) {
            ObjectNode remade = golden.deepCopy();
            java.util.Iterator<String> names = golden.fieldNames();
            while (names.hasNext()) {
                String name = names.next();
                if (!INPUTS.contains(name) && !state.has(name)) remade.remove(name);
            }
            state.fields().forEachRemaining(e -> remade.set(e.getKey(), e.getValue()));
            state.put("golden_state", Main.MAPPER.writerWithDefaultPrettyPrinter().writeValueAsString(remade));
            StringBuilder lines = new StringBuilder();
            for (JsonNode line : timeline) lines.append(Main.MAPPER.writeValueAsString(line)).append('\n');
            state.put("golden_epochs", lines.toString());
        }
        state.put("records_replayed", replayed);
        state.put("records_skipped", skipped);
        if (epochs) state.set("epochs", timeline);
        return state;
    }
}
