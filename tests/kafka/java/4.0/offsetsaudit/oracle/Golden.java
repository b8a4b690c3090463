package offsetsaudit.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.message.ConsumerProtocolAssignment;
import org.apache.kafka.common.message.ConsumerProtocolSubscription;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.server.common.ApiMessageAndVersion;

import java.io.File;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.List;

/**
 * The golden codec data judged again by a Kafka release: what its own classes make of the stored bytes.
 *
 * <pre>
 *   golden [records IN.jsonl SEGMENT] [hash TOPICS.jsonl GROUPS.jsonl] [segment FILE...]   the parts given, in one JVM
 *   golden records IN.jsonl SEGMENT   each coordinator record vector deserialized with GroupCoordinatorRecordSerde,
 *                                     written back with it, and printed as the generated JSON converters print it;
 *                                     each consumer protocol vector (a line with "kind") the same way through
 *                                     its generated message class; all record vectors are also written, in input
 *                                     order from offset 0, as one batch of SEGMENT for kafka-dump-log to print
 *   golden hash TOPICS.jsonl GROUPS.jsonl   each topic case's hash ({"topic_hash"}) and each group case's topic hashes
 *                                     and group hash ({"topic_hashes", "group_hash"}) as Utils.computeTopicHash and
 *                                     computeGroupHash give them over a KRaft metadata image holding the case's topics,
 *                                     each partition's replicas on brokers of the case's racks (Kafka 4.2 and later)
 *   golden segment FILE...            every record of each segment file as FileRecords.batches() reads it (the
 *                                     way kafka-dump-log reads it, wrapped legacy messages included)
 * </pre>
 * The JSON converters are looked up by name beside each message class, since the releases differ in which
 * aggregate converter classes they ship.
 */
final class Golden {
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    private Golden() { }

    static void main(String[] args, PrintStream out) throws Exception {
        int i = 1;
        if (args.length >= 4 && args[1].equals("records")) {
            records(args[2], new File(args[3]), out);
            i = 4;
        }
        if (i + 2 < args.length && args[i].equals("hash")) {
            hashes(args[i + 1], args[i + 2], out);
            i += 3;
        }
        if (i < args.length && args[i].equals("segment")) {
            for (i = i + 1; i < args.length; i++) {
                for (ObjectNode line : SegmentLog.describeSegment(new File(args[i]))) {
                    line.put("file", new File(args[i]).getName());
                    out.println(Main.MAPPER.writeValueAsString(line));
                }
            }
        }
        if (i != args.length || args.length < 3) {
            System.err.println("usage: golden [records IN.jsonl SEGMENT] [hash TOPICS.jsonl GROUPS.jsonl] [segment FILE...]");
            System.exit(2);
        }
    }

    private static void records(String in, File segment, PrintStream out) throws Exception {
        GroupCoordinatorRecordSerde serde = new GroupCoordinatorRecordSerde();
        List<byte[][]> keyValues = new ArrayList<>();
        for (JsonNode line : Main.readLines(in)) {
            ObjectNode o = JSON.objectNode();
            if (line.has("kind")) {
                protocol(line, o);
                out.println(Main.MAPPER.writeValueAsString(o));
                continue;
            }
            byte[] key = Base64.getDecoder().decode(line.get("key_b64").asText());
            byte[] value = line.get("value_b64").isNull() ? null : Base64.getDecoder().decode(line.get("value_b64").asText());
            keyValues.add(new byte[][]{key, value});
            try {
                CoordinatorRecord record = serde.deserialize(ByteBuffer.wrap(key), value == null ? null : ByteBuffer.wrap(value));
                Object k = record.key();
                ApiMessage keyMessage = k instanceof ApiMessageAndVersion ? ((ApiMessageAndVersion) k).message() : (ApiMessage) k;
                short keyVersion = k instanceof ApiMessageAndVersion ? ((ApiMessageAndVersion) k).version() : 0;
                o.set("key_json", json(keyMessage, keyVersion));
                o.put("key_b64", Base64.getEncoder().encodeToString(serde.serializeKey(record)));
                ApiMessageAndVersion v = record.value();
                if (v == null) {
                    o.putNull("value_json");
                    o.putNull("value_b64");
                    o.putNull("value_version");
                } else {
                    o.set("value_json", json(v.message(), v.version()));
                    o.put("value_b64", Base64.getEncoder().encodeToString(serde.serializeValue(record)));
                    o.put("value_version", v.version());
                }
            } catch (RuntimeException e) {
                o.put("error", error(e));
            }
            out.println(Main.MAPPER.writeValueAsString(o));
        }
        SegmentLog.writeSegment(segment, Collections.singletonList(
            SegmentLog.dataBatch(0, 0L, -1L, (short) -1, "none", keyValues)));
    }

    private static void hashes(String topicsPath, String groupsPath, PrintStream out) throws Exception {
        Class<?> utils = Class.forName("org.apache.kafka.coordinator.group.Utils");
        Class<?> imageType = Class.forName("org.apache.kafka.coordinator.common.runtime.CoordinatorMetadataImage");
        java.lang.reflect.Constructor<?> kraftImage = Class.forName(
            "org.apache.kafka.coordinator.common.runtime.KRaftCoordinatorMetadataImage").getConstructor(
            org.apache.kafka.image.MetadataImage.class);
        Method topicHash = utils.getMethod("computeTopicHash", String.class, imageType);
        Method groupHash = utils.getMethod("computeGroupHash", java.util.Map.class);
        for (JsonNode line : Main.readLines(topicsPath)) {
            List<JsonNode> topics = line.has("partitions") ? Collections.singletonList(line) : Collections.emptyList();
            Object image = kraftImage.newInstance(image(topics));
            ObjectNode o = JSON.objectNode();
            o.put("topic_hash", (Long) topicHash.invoke(null, line.get("name").asText(), image));
            out.println(Main.MAPPER.writeValueAsString(o));
        }
        for (JsonNode line : Main.readLines(groupsPath)) {
            // Each topic's hash depends on that topic alone; an image of its own keeps cases whose random topics
            // share an id apart, as no cluster could hold them together.
            java.util.Map<String, JsonNode> topics = new java.util.HashMap<>();
            for (JsonNode topic : line.get("topics")) topics.put(topic.get("name").asText(), topic);
            java.util.Map<String, Long> hashes = new java.util.TreeMap<>();
            for (JsonNode name : line.get("subscribed_topic_names")) {
                JsonNode topic = topics.get(name.asText());
                if (topic != null) hashes.put(name.asText(), (Long) topicHash.invoke(null, name.asText(),
                    kraftImage.newInstance(image(Collections.singletonList(topic)))));
            }
            ObjectNode o = JSON.objectNode();
            ObjectNode byName = o.putObject("topic_hashes");
            hashes.forEach(byName::put);
            o.put("group_hash", (Long) groupHash.invoke(null, hashes));
            out.println(Main.MAPPER.writeValueAsString(o));
        }
    }

    /** A metadata image holding the topics, each partition's replicas on brokers of its listed racks (one broker
     *  per listed rack, so a rack listed twice is two replicas) and on a broker with no rack. */
    private static org.apache.kafka.image.MetadataImage image(List<JsonNode> topics) {
        Cluster cluster = new Cluster();
        org.apache.kafka.image.MetadataDelta delta = cluster.newDelta();
        int rackless = 0;
        cluster.registerBroker(delta, rackless, null);
        int nextBroker = 1;
        for (JsonNode topic : topics) {
            int partitions = topic.get("partitions").asInt();
            JsonNode racks = topic.get("partition_racks");
            List<List<Integer>> replicas = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                List<Integer> ids = new ArrayList<>();
                ids.add(rackless);
                if (racks != null && !racks.isNull()) {
                    for (JsonNode rack : racks.get(p)) {
                        cluster.registerBroker(delta, nextBroker, rack.asText());
                        ids.add(nextBroker++);
                    }
                }
                replicas.add(ids);
            }
            cluster.createTopic(delta, topic.get("name").asText(),
                org.apache.kafka.common.Uuid.fromString(topic.get("topic_id").asText()), partitions, replicas);
        }
        return cluster.apply(delta);
    }

    private static void protocol(JsonNode line, ObjectNode o) throws Exception {
        ByteBuffer buffer = ByteBuffer.wrap(Base64.getDecoder().decode(line.get("value_b64").asText()));
        short version = buffer.getShort();
        ApiMessage message = line.get("kind").asText().equals("subscription")
            ? new ConsumerProtocolSubscription(new ByteBufferAccessor(buffer), version)
            : new ConsumerProtocolAssignment(new ByteBufferAccessor(buffer), version);
        o.set("value_json", json(message, version));
        o.put("value_b64", Base64.getEncoder().encodeToString(MessageUtil.toVersionPrefixedBytes(version, message)));
    }

    /** The message as its generated {@code <Message>JsonConverter.write} prints it. */
    static JsonNode json(ApiMessage message, short version) throws Exception {
        Class<?> converter = Class.forName(message.getClass().getName() + "JsonConverter");
        Method write = converter.getMethod("write", message.getClass(), short.class);
        return (JsonNode) write.invoke(null, message, version);
    }

    /** The serde's exception as the golden data names it: its class, and the record type it did not know. */
    private static String error(RuntimeException e) {
        try {
            Method unknown = e.getClass().getMethod("unknownType");
            return e.getClass().getSimpleName() + "(" + unknown.invoke(e) + ")";
        } catch (ReflectiveOperationException ignored) {
            return e.getClass().getSimpleName();
        }
    }
}
