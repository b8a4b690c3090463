package offsetsaudit.oracle;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.message.ConsumerGroupDescribeResponseData;
import org.apache.kafka.common.message.ConsumerGroupDescribeResponseDataJsonConverter;
import org.apache.kafka.common.message.DescribeGroupsResponseData;
import org.apache.kafka.common.message.DescribeGroupsResponseDataJsonConverter;
import org.apache.kafka.common.message.ListGroupsResponseData;
import org.apache.kafka.common.message.ListGroupsResponseDataJsonConverter;
import org.apache.kafka.common.message.OffsetFetchRequestData;
import org.apache.kafka.common.message.OffsetFetchResponseData;
import org.apache.kafka.common.message.OffsetFetchResponseDataJsonConverter;
import org.apache.kafka.common.message.ShareGroupDescribeResponseData;
import org.apache.kafka.common.message.ShareGroupDescribeResponseDataJsonConverter;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.network.ClientInformation;
import org.apache.kafka.common.network.ListenerName;
import org.apache.kafka.common.requests.RequestContext;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.TransactionResult;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorResult;
import org.apache.kafka.coordinator.group.GroupConfigManager;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.GroupCoordinatorShard;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Supplier;

/**
 * One {@code __consumer_offsets} partition's group coordinator, hosted the way {@code CoordinatorRuntime} hosts a
 * shard: an operation's records are replayed into the shard at the offsets they get and appended as one batch
 * (magic 2, CreateTime = the append time, producer id and epoch of a transactional write), the snapshot registry
 * gets a snapshot at every new log end offset, transaction markers are replayed and written as control batches,
 * timers and background tasks run as write operations of their own. Everything is committed at once (a one-replica
 * log), so reads see the latest state.
 */
final class Coordinator {
    static final JsonNodeFactory JSON = JsonNodeFactory.instance;
    static final long LATEST = Long.MAX_VALUE;

    final int partition;
    final ManualClock clock;
    final ManualTimer timer;
    final InlineExecutor executor;
    final GroupCoordinatorShard shard;
    final Object registry;
    final GroupConfigManager configManager;
    final GroupCoordinatorRecordSerde serde = new GroupCoordinatorRecordSerde();
    final List<ByteBuffer> batches = new ArrayList<>();
    final String compression;
    final ArrayNode epochs = JSON.arrayNode();
    final ArrayNode events;
    final boolean recordEpochs;
    long nextOffset;
    long records;
    /** Whether each group view in an epochs line shows the member table's order and capacity (golden files predate them). */
    boolean memberTable = true;

    Coordinator(int partition, Map<String, Object> brokerProps, long startMs, String compression, boolean recordEpochs,
                ArrayNode events) {
        this.partition = partition;
        this.clock = new ManualClock(startMs);
        this.timer = new ManualTimer(clock);
        this.executor = new InlineExecutor();
        Object[] registryOut = new Object[1];
        Object[] configOut = new Object[1];
        this.shard = Compat.buildShard(brokerProps, clock, timer, executor, partition, registryOut, configOut);
        this.registry = registryOut[0];
        this.configManager = (GroupConfigManager) configOut[0];
        this.compression = compression;
        this.recordEpochs = recordEpochs;
        this.events = events;
        Compat.idempotentCreateSnapshot(registry, 0);
    }

    // -- requests --------------------------------------------------------------------------------------------------

    /** A request context as the broker builds one for {@code api} at {@code version} from a client. */
    static RequestContext context(ApiKeys api, short version, String clientId, String host) {
        try {
            return new RequestContext(new RequestHeader(api, version, clientId, 0), "oracle-connection",
                InetAddress.getByAddress(host, new byte[]{127, 0, 0, 1}), KafkaPrincipal.ANONYMOUS,
                ListenerName.forSecurityProtocol(SecurityProtocol.PLAINTEXT), SecurityProtocol.PLAINTEXT,
                ClientInformation.EMPTY, false);
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e);
        }
    }

    static RequestContext context(ApiKeys api, String clientId, String host) {
        return context(api, api.latestVersion(), clientId, host);
    }

    // -- the write path --------------------------------------------------------------------------------------------

    /**
     * Runs a write operation: generates its records and response, replays and appends the records as one batch,
     * completes its append future. An operation that throws writes nothing (the exception reaches the caller).
     */
    <T> T write(Supplier<CoordinatorResult<T, CoordinatorRecord>> operation) {
        return write(operation, -1L, (short) -1);
    }

    <T> T write(Supplier<CoordinatorResult<T, CoordinatorRecord>> operation, long producerId, short producerEpoch) {
        CoordinatorResult<T, CoordinatorRecord> result = operation.get();
        return complete(result, producerId, producerEpoch);
    }

    <T> T complete(CoordinatorResult<T, CoordinatorRecord> result, long producerId, short producerEpoch) {
        append(result.records(), result.replayRecords(), producerId, producerEpoch);
        if (result.appendFuture() != null) result.appendFuture().complete(null);
        return result.response();
    }

    void append(List<CoordinatorRecord> batch, boolean replay, long producerId, short producerEpoch) {
        if (batch.isEmpty()) return;
        long base = nextOffset;
        List<byte[][]> keyValues = new ArrayList<>(batch.size());
        Set<String> groups = new LinkedHashSet<>();
        for (CoordinatorRecord record : batch) {
            if (replay) shard.replay(nextOffset, producerId, producerEpoch, record);
            keyValues.add(new byte[][]{serde.serializeKey(record), record.value() == null ? null : serde.serializeValue(record)});
            if (recordEpochs) groups.add(groupOf(record));
            nextOffset++;
        }
        records += batch.size();
        batches.add(SegmentLog.dataBatch(base, clock.milliseconds(), producerId, producerEpoch, compression, keyValues));
        commit();
        if (recordEpochs) epochs.add(epochsLine(base, nextOffset - 1, groups));
    }

    /** A transaction's end: the marker replayed into the shard, then written as a control batch. */
    void endTransaction(long producerId, short producerEpoch, boolean commit, int coordinatorEpoch) {
        shard.replayEndTransactionMarker(producerId, producerEpoch, commit ? TransactionResult.COMMIT : TransactionResult.ABORT);
        batches.add(SegmentLog.controlBatch(nextOffset, clock.milliseconds(), producerId, producerEpoch, commit, coordinatorEpoch));
        nextOffset++;
        commit();
    }

    private void commit() {
        Compat.idempotentCreateSnapshot(registry, nextOffset);
        Compat.deleteSnapshotsUpTo(registry, nextOffset);
    }

    /** Fires every timer due at the clock's time, earliest first; returns whether one fired. */
    @SuppressWarnings("unchecked")
    boolean runTimers() {
        boolean fired = false;
        ManualTimer.Task task;
        while ((task = timer.pollDue(clock.milliseconds())) != null) {
            fired = true;
            long before = nextOffset;
            ManualTimer.Task due = task;
            try {
                write(() -> (CoordinatorResult<Object, CoordinatorRecord>) due.operation.generateRecords());
            } catch (RuntimeException e) {
                if (task.retry) timer.schedule(task.key, task.retryBackoffMs, java.util.concurrent.TimeUnit.MILLISECONDS,
                    true, task.retryBackoffMs, task.operation);
                event("timer-error", before, detail("key", task.key).put("error", e.getClass().getSimpleName()));
                continue;
            }
            if (nextOffset > before) event("timer", before, detail("key", task.key));
        }
        return fired;
    }

    /** Runs the background tasks scheduled so far and applies each result as a write; returns whether one ran. */
    @SuppressWarnings("unchecked")
    boolean runExecutor() {
        boolean ran = false;
        InlineExecutor.Task task;
        while ((task = executor.poll()) != null) {
            ran = true;
            Object value = null;
            Throwable error = null;
            try {
                value = task.runnable.run();
            } catch (Throwable t) {
                error = t;
            }
            if (!executor.complete(task)) continue;
            long before = nextOffset;
            Object v = value;
            Throwable err = error;
            InlineExecutor.Task t = task;
            try {
                write(() -> (CoordinatorResult<Object, CoordinatorRecord>) t.operation.onComplete(v, err));
            } catch (RuntimeException e) {
                event("task-error", before, detail("key", task.key).put("error", e.getClass().getSimpleName()));
                continue;
            }
            if (nextOffset > before) event("task", before, detail("key", task.key));
        }
        return ran;
    }

    void updateGroupConfig(String groupId, Map<String, String> configs) {
        Properties props = new Properties();
        props.putAll(configs);
        configManager.updateGroupConfig(groupId, props);
    }

    // -- events and views ------------------------------------------------------------------------------------------

    static ObjectNode detail(String key, String value) {
        ObjectNode node = JSON.objectNode();
        node.put(key, value);
        return node;
    }

    void event(String kind, long offsetBefore, ObjectNode detail) {
        if (events == null) return;
        ObjectNode e = JSON.objectNode();
        e.put("time_ms", clock.milliseconds());
        e.put("kind", kind);
        e.put("offset", offsetBefore);
        e.put("next_offset", nextOffset);
        e.set("detail", detail);
        events.add(e);
    }

    static Errors errorOf(Throwable t) {
        Throwable cause = t;
        while (cause instanceof java.util.concurrent.CompletionException && cause.getCause() != null) cause = cause.getCause();
        if (cause instanceof ApiException) return Errors.forException(cause);
        return Errors.UNKNOWN_SERVER_ERROR;
    }

    static String groupOf(CoordinatorRecord record) {
        Object key = record.key();
        Object id = Reflect.has(key, "groupId", 0) ? Reflect.call(key, "groupId") : Reflect.call(key, "group");
        return id == null ? "" : id.toString();
    }

    Object groupMetadataManager() {
        return Reflect.field(shard, "groupMetadataManager");
    }

    /** The group's in-memory object, or null when it does not exist. */
    Object group(String groupId) {
        try {
            return Reflect.call(groupMetadataManager(), "group", groupId);
        } catch (RuntimeException e) {
            return null;
        }
    }

    /** One {@code *.epochs.jsonl} line: the coordinator's view of the groups a batch touched, right after it. */
    ObjectNode epochsLine(long base, long last, Collection<String> groupIds) {
        ObjectNode line = JSON.objectNode();
        line.put("batch_base_offset", base);
        line.put("batch_last_offset", last);
        line.put("time_ms", clock.milliseconds());
        ArrayNode groups = line.putArray("groups");
        for (String id : groupIds) groups.add(groupView(id));
        return line;
    }

    ObjectNode groupView(String groupId) {
        ObjectNode view = JSON.objectNode();
        view.put("group_id", groupId);
        Object group = group(groupId);
        if (group == null) {
            view.put("exists", false);
            return view;
        }
        view.put("exists", true);
        String type = String.valueOf(Reflect.call(group, "type")).toLowerCase();
        view.put("type", type);
        view.put("state", (String) Reflect.call(group, "stateAsString"));
        if (type.equals("classic")) {
            view.put("generation", (Integer) Reflect.call(group, "generationId"));
            Object protocol = Reflect.call(group, "protocolName");
            view.put("protocol", protocol instanceof java.util.Optional ? (String) ((java.util.Optional<?>) protocol).orElse(null) : null);
            view.put("leader", (String) Reflect.call(group, "leaderOrNull"));
            ArrayNode members = view.putArray("members");
            for (Object m : (Collection<?>) Reflect.call(group, "allMembers")) members.add((String) Reflect.call(m, "memberId"));
            return view;
        }
        view.put("group_epoch", (Integer) Reflect.call(group, "groupEpoch"));
        Object assignmentEpoch = Reflect.has(group, "assignmentEpoch", 0) ? Reflect.call(group, "assignmentEpoch")
            : Reflect.call(group, "targetAssignmentEpoch");
        view.put("assignment_epoch", (Integer) assignmentEpoch);
        Object timestamp = Reflect.call(group, "assignmentTimestamp");
        if (timestamp != null) view.put("assignment_timestamp", (Long) timestamp);
        else view.putNull("assignment_timestamp");
        if (type.equals("streams")) {
            Object topology = Reflect.call(group, "topology");
            Object t = topology instanceof java.util.Optional ? ((java.util.Optional<?>) topology).orElse(null) : topology;
            if (t == null) view.putNull("topology_epoch");
            else view.put("topology_epoch", (Integer) Reflect.call(t, "topologyEpoch"));
        }
        ArrayNode members = view.putArray("members");
        Map<?, ?> byId = (Map<?, ?>) Reflect.call(group, "members");
        // the member table's own iteration order (a TimelineHashMap): what the assignor's inputs are built in
        if (memberTable) {
            ArrayNode table = view.putArray("member_table_order");
            for (Object id : byId.keySet()) table.add(String.valueOf(id));
            Object table0 = Reflect.field(group, "members");
            Object elements = table0 == null ? null : Reflect.field(table0, "elements");
            if (elements instanceof Object[]) view.put("member_table_capacity", ((Object[]) elements).length);
        }
        for (Object m : new TreeMap<>(byId).values()) {
            ObjectNode mv = members.addObject();
            mv.put("member_id", (String) Reflect.call(m, "memberId"));
            mv.put("member_epoch", (Integer) Reflect.call(m, "memberEpoch"));
            mv.put("state", String.valueOf(Reflect.call(m, "state")));
            if (type.equals("streams")) {
                mv.put("process_id", (String) Reflect.call(m, "processId"));
            } else {
                Object instance = Reflect.call(m, "instanceId");
                mv.put("instance_id", instance instanceof java.util.Optional ? (String) ((java.util.Optional<?>) instance).orElse(null) : (String) instance);
                Object classic = Reflect.call(m, "useClassicProtocol");
                mv.put("classic_protocol", classic != null && (Boolean) classic);
            }
        }
        return view;
    }

    // -- what Kafka answers: describe, list, offset fetch ----------------------------------------------------------

    List<ListGroupsResponseData.ListedGroup> listGroups() {
        return shard.listGroups(Collections.emptyList(), Collections.emptyList(), LATEST);
    }

    /** The final state in the golden {@code *.state.json} layout (Kafka JSON of each describe, list and fetch). */
    ObjectNode state() {
        return state(true, null);
    }

    private static List<String> askedOr(JsonNode asked, String field, List<String> otherwise) {
        if (!asked.has(field)) return otherwise;
        List<String> ids = new ArrayList<>();
        for (JsonNode g : asked.get(field)) ids.add(g.path("groupId").asText());
        return ids;
    }

    /**
     * What Kafka answers at the end: ListGroups, each type's describe of the listed groups, OffsetFetch of every
     * group. {@code sorted}: groups by id, topics by name and partitions by index; otherwise in the order Kafka
     * answers. {@code asked}: null, or a state in this layout whose describe and offset lists name the groups to
     * ask about, in that order (a list it lacks: the listed groups of that type).
     */
    ObjectNode state(boolean sorted, JsonNode asked) {
        ObjectNode out = JSON.objectNode();
        List<ListGroupsResponseData.ListedGroup> listed = new ArrayList<>(listGroups());
        if (sorted) listed.sort((a, b) -> a.groupId().compareTo(b.groupId()));
        List<String> consumer = new ArrayList<>();
        List<String> share = new ArrayList<>();
        List<String> streams = new ArrayList<>();
        List<String> classic = new ArrayList<>();
        ArrayNode list = JSON.arrayNode();
        for (ListGroupsResponseData.ListedGroup g : listed) {
            list.add(ListGroupsResponseDataJsonConverter.ListedGroupJsonConverter.write(g, (short) 5));
            switch (g.groupType()) {
                case "consumer": consumer.add(g.groupId()); break;
                case "share": share.add(g.groupId()); break;
                case "streams": streams.add(g.groupId()); break;
                default: classic.add(g.groupId()); break;
            }
        }
        if (asked != null) {
            consumer = askedOr(asked, "consumer_group_describe", consumer);
            share = askedOr(asked, "share_group_describe", share);
            streams = askedOr(asked, "streams_group_describe", streams);
            classic = askedOr(asked, "classic_group_describe", classic);
        }
        if (!consumer.isEmpty()) {
            ArrayNode a = out.putArray("consumer_group_describe");
            for (ConsumerGroupDescribeResponseData.DescribedGroup g : shard.consumerGroupDescribe(consumer, LATEST))
                a.add(ConsumerGroupDescribeResponseDataJsonConverter.DescribedGroupJsonConverter.write(g, ConsumerGroupDescribeResponseData.HIGHEST_SUPPORTED_VERSION));
        }
        if (!share.isEmpty()) {
            ArrayNode a = out.putArray("share_group_describe");
            for (ShareGroupDescribeResponseData.DescribedGroup g : shard.shareGroupDescribe(share, LATEST))
                a.add(ShareGroupDescribeResponseDataJsonConverter.DescribedGroupJsonConverter.write(g, ShareGroupDescribeResponseData.HIGHEST_SUPPORTED_VERSION));
        }
        if (!streams.isEmpty()) {
            out.set("streams_group_describe", Streams.describe(shard, streams, LATEST));
        }
        if (!classic.isEmpty()) {
            ArrayNode a = out.putArray("classic_group_describe");
            RequestContext ctx = context(ApiKeys.DESCRIBE_GROUPS, "oracle", "localhost");
            for (DescribeGroupsResponseData.DescribedGroup g : shard.describeGroups(ctx, classic, LATEST))
                a.add(DescribeGroupsResponseDataJsonConverter.DescribedGroupJsonConverter.write(g, (short) 5));
        }
        ArrayNode offsets = out.putArray("committed_offsets");
        List<String> fetchedGroups = new ArrayList<>();
        for (ListGroupsResponseData.ListedGroup g : listed) fetchedGroups.add(g.groupId());
        if (asked != null) fetchedGroups = askedOr(asked, "committed_offsets", fetchedGroups);
        for (String groupId : fetchedGroups) {
            OffsetFetchResponseData.OffsetFetchResponseGroup fetched = Compat.fetchAllOffsets(shard,
                new OffsetFetchRequestData.OffsetFetchRequestGroup().setGroupId(groupId).setTopics(null), LATEST);
            if (sorted) {
                List<OffsetFetchResponseData.OffsetFetchResponseTopics> topics = new ArrayList<>(fetched.topics());
                topics.sort((a, b) -> a.name().compareTo(b.name()));
                for (OffsetFetchResponseData.OffsetFetchResponseTopics t : topics) {
                    List<OffsetFetchResponseData.OffsetFetchResponsePartitions> ps = new ArrayList<>(t.partitions());
                    ps.sort((a, b) -> Integer.compare(a.partitionIndex(), b.partitionIndex()));
                    t.setPartitions(ps);
                }
                fetched.setTopics(topics);
            }
            offsets.add(OffsetFetchResponseDataJsonConverter.OffsetFetchResponseGroupJsonConverter.write(fetched, (short) 9));
        }
        out.set("list_groups", list);
        out.put("partition", partition);
        out.put("final_time_ms", clock.milliseconds());
        out.put("last_offset", nextOffset - 1);
        return out;
    }
}
