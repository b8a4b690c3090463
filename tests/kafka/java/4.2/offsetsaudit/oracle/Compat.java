package offsetsaudit.oracle;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.internals.Plugin;
import org.apache.kafka.common.message.JoinGroupRequestData;
import org.apache.kafka.common.message.JoinGroupResponseData;
import org.apache.kafka.common.message.ShareGroupHeartbeatRequestData;
import org.apache.kafka.common.message.ShareGroupHeartbeatResponseData;
import org.apache.kafka.common.message.StreamsGroupDescribeResponseData;
import org.apache.kafka.common.message.StreamsGroupHeartbeatRequestData;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.EndTransactionMarker;
import org.apache.kafka.common.record.FileLogInputStream;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.requests.RequestContext;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.coordinator.common.runtime.CoordinatorExecutor;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorResult;
import org.apache.kafka.coordinator.common.runtime.CoordinatorTimer;
import org.apache.kafka.coordinator.common.runtime.KRaftCoordinatorMetadataDelta;
import org.apache.kafka.coordinator.common.runtime.KRaftCoordinatorMetadataImage;
import org.apache.kafka.coordinator.group.GroupConfigManager;
import org.apache.kafka.coordinator.group.GroupCoordinatorConfig;
import org.apache.kafka.coordinator.group.GroupCoordinatorShard;
import org.apache.kafka.coordinator.group.metrics.GroupCoordinatorMetrics;
import org.apache.kafka.coordinator.group.modern.share.ShareGroupConfig;
import org.apache.kafka.coordinator.group.streams.StreamsGroupHeartbeatResult;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.server.share.persister.InitializeShareGroupStateParameters;
import org.apache.kafka.server.share.persister.PartitionStateData;
import org.apache.kafka.server.share.persister.TopicData;
import org.apache.kafka.timeline.SnapshotRegistry;

import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * What differs between Kafka versions in the group coordinator's internal API, for Kafka 4.2 (and 4.3): the shard's builder
 * and its metadata-image hooks, the log classes, share group state
 * initialisation, streams groups and topic deletion. One copy of this class per range of Kafka versions; every
 * other oracle class is the same source for all of them.
 */
final class Compat {
    private Compat() { }

    static final String KAFKA_LINE = "4.2";
    static final String PROTOCOLS = "classic,consumer,share,streams";
    /** OffsetCommit v10 names topics by id; the broker resolves the names before the shard sees the request. */
    static final short OFFSET_COMMIT_VERSION = 10;

    static Map<String, Object> extraBrokerProps() {
        return new HashMap<>();
    }

    static void setCommitTopicId(org.apache.kafka.common.message.OffsetCommitRequestData.OffsetCommitRequestTopic topic, Uuid id) {
        topic.setTopicId(id);
    }

    static void setTxnGeneration(org.apache.kafka.common.message.TxnOffsetCommitRequestData request, int generation) {
        request.setGenerationId(generation);
    }

    static org.apache.kafka.common.message.OffsetFetchResponseData.OffsetFetchResponseGroup fetchAllOffsets(
            GroupCoordinatorShard shard, org.apache.kafka.common.message.OffsetFetchRequestData.OffsetFetchRequestGroup request,
            long offset) {
        return shard.fetchAllOffsets(request, offset);
    }

    /** The shard built the way {@code GroupCoordinatorService} builds one through {@code GroupCoordinatorShard.Builder}. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static GroupCoordinatorShard buildShard(Map<String, Object> brokerProps, ManualClock clock, CoordinatorTimer timer,
                                            CoordinatorExecutor executor, int partition, Object[] registryOut,
                                            Object[] configManagerOut) {
        GroupCoordinatorConfig config = GroupCoordinatorConfig.fromProps(brokerProps);
        org.apache.kafka.common.config.ConfigDef definitions = new org.apache.kafka.common.config.ConfigDef(GroupCoordinatorConfig.CONFIG_DEF);
        for (org.apache.kafka.common.config.ConfigDef.ConfigKey key : ShareGroupConfig.CONFIG_DEF.configKeys().values())
            if (!definitions.configKeys().containsKey(key.name)) definitions.define(key);
        ShareGroupConfig shareConfig = new ShareGroupConfig(new org.apache.kafka.common.config.AbstractConfig(definitions, brokerProps, false));
        GroupConfigManager configManager = new GroupConfigManager(config.extractGroupConfigMap(shareConfig));
        LogContext logContext = new LogContext("[oracle " + partition + "] ");
        SnapshotRegistry registry = new SnapshotRegistry(logContext);
        registryOut[0] = registry;
        configManagerOut[0] = configManager;
        GroupCoordinatorShard.Builder builder = new GroupCoordinatorShard.Builder(config, configManager);
        builder.withAuthorizerPlugin(Optional.<Plugin<org.apache.kafka.server.authorizer.Authorizer>>empty());
        return (GroupCoordinatorShard) builder
            .withLogContext(logContext)
            .withTime(clock)
            .withTimer(timer)
            .withExecutor(executor)
            .withCoordinatorMetrics(new GroupCoordinatorMetrics())
            .withTopicPartition(new TopicPartition("__consumer_offsets", partition))
            .withSnapshotRegistry(registry)
            .build();
    }

    /** The assignors' {@code GroupSpec} as the coordinator builds it (with the share groups' assignable partitions). */
    static org.apache.kafka.coordinator.group.api.assignor.GroupSpec groupSpec(
            Map<String, org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl> members,
            org.apache.kafka.coordinator.group.api.assignor.SubscriptionType type, Map<Uuid, Map<Integer, String>> inverted,
            Map<Uuid, Set<Integer>> assignable) {
        return new org.apache.kafka.coordinator.group.modern.GroupSpecImpl(members, type, inverted, Optional.ofNullable(assignable));
    }

    static void idempotentCreateSnapshot(Object registry, long offset) {
        ((SnapshotRegistry) registry).idempotentCreateSnapshot(offset);
    }

    static void deleteSnapshotsUpTo(Object registry, long offset) {
        ((SnapshotRegistry) registry).deleteSnapshotsUpTo(offset);
    }

    static void onLoaded(GroupCoordinatorShard shard, MetadataImage image) {
        shard.onLoaded(new KRaftCoordinatorMetadataImage(image));
    }

    static void onMetadataUpdate(GroupCoordinatorShard shard, MetadataDelta delta, MetadataImage image) {
        shard.onNewMetadataImage(new KRaftCoordinatorMetadataImage(image), new KRaftCoordinatorMetadataDelta(delta));
    }

    /** The records Kafka writes when topics are deleted (offsets of their partitions, share state). */
    static CoordinatorResult<Void, CoordinatorRecord> onTopicsDeleted(GroupCoordinatorShard shard, Map<Uuid, String> topics,
                                                                      Map<Uuid, Integer> partitions) {
        List<TopicPartition> deleted = new ArrayList<>();
        topics.forEach((id, name) -> {
            for (int p = 0; p < partitions.get(id); p++) deleted.add(new TopicPartition(name, p));
        });
        return shard.onPartitionsDeleted(deleted);
    }

    static CoordinatorResult<?, CoordinatorRecord> classicJoin(GroupCoordinatorShard shard, RequestContext context,
                                                               JoinGroupRequestData request,
                                                               CompletableFuture<JoinGroupResponseData> future) {
        return shard.classicGroupJoin(context, request, future);
    }

    /** A share heartbeat's response and the share partitions the persister is asked to initialise (topic id → partitions). */
    static Object[] shareHeartbeat(GroupCoordinatorShard shard, RequestContext context, ShareGroupHeartbeatRequestData request,
                                   Object[] resultOut) {
        CoordinatorResult<Map.Entry<ShareGroupHeartbeatResponseData, Optional<InitializeShareGroupStateParameters>>, CoordinatorRecord> result =
            shard.shareGroupHeartbeat(context, request);
        resultOut[0] = result;
        Map<Uuid, Set<Integer>> initialise = null;
        Optional<InitializeShareGroupStateParameters> params = result.response().getValue();
        if (params.isPresent()) {
            initialise = new HashMap<>();
            for (TopicData<PartitionStateData> topic : params.get().groupTopicPartitionData().topicsData()) {
                Set<Integer> set = initialise.computeIfAbsent(topic.topicId(), k -> new HashSet<>());
                for (PartitionStateData p : topic.partitions()) set.add(p.partition());
            }
        }
        return new Object[]{result.response().getKey(), initialise};
    }

    static CoordinatorResult<Void, CoordinatorRecord> initializeShareGroupState(GroupCoordinatorShard shard, String groupId,
                                                                                Map<Uuid, Set<Integer>> partitions) {
        return shard.initializeShareGroupState(groupId, partitions);
    }

    /** A streams heartbeat: [response data, creatable topic names → partitions]. */
    static Object[] streamsHeartbeat(GroupCoordinatorShard shard, RequestContext context, StreamsGroupHeartbeatRequestData request,
                                     Object[] resultOut) {
        CoordinatorResult<StreamsGroupHeartbeatResult, CoordinatorRecord> result = shard.streamsGroupHeartbeat(context, request);
        resultOut[0] = result;
        Map<String, Integer> creatable = new HashMap<>();
        result.response().creatableTopics().forEach((name, topic) -> creatable.put(name, topic.numPartitions()));
        return new Object[]{result.response().data(), creatable};
    }

    static List<StreamsGroupDescribeResponseData.DescribedGroup> streamsDescribe(GroupCoordinatorShard shard, List<String> groups, long offset) {
        return shard.streamsGroupDescribe(groups, offset);
    }

    // -- the log ---------------------------------------------------------------------------------------------------

    /** One data batch as the coordinator runtime builds it (magic 2, CreateTime, base sequence 0, no leader epoch). */
    static ByteBuffer dataBatch(long baseOffset, long timestamp, long producerId, short producerEpoch, String compression,
                                List<byte[][]> keyValues) {
        ByteBuffer buffer = ByteBuffer.allocate(1024 + keyValues.stream().mapToInt(kv -> 64 + kv[0].length
            + (kv[1] == null ? 0 : kv[1].length)).sum());
        MemoryRecordsBuilder builder = new MemoryRecordsBuilder(buffer, RecordBatch.CURRENT_MAGIC_VALUE,
            compression(compression), TimestampType.CREATE_TIME, baseOffset, timestamp, producerId, producerEpoch, 0,
            producerId != RecordBatch.NO_PRODUCER_ID, false, RecordBatch.NO_PARTITION_LEADER_EPOCH, buffer.capacity());
        for (byte[][] kv : keyValues) builder.append(timestamp, kv[0], kv[1]);
        return builder.build().buffer();
    }

    /** A transaction marker batch as {@code CoordinatorRuntime.completeTransaction} writes it. */
    static ByteBuffer controlBatch(long offset, long timestamp, long producerId, short producerEpoch, boolean commit,
                                   int coordinatorEpoch) {
        return MemoryRecords.withEndTransactionMarker(offset, timestamp, RecordBatch.NO_PARTITION_LEADER_EPOCH, producerId,
            producerEpoch, new EndTransactionMarker(commit ? ControlRecordType.COMMIT : ControlRecordType.ABORT,
                coordinatorEpoch)).buffer();
    }

    private static Compression compression(String name) {
        switch (name == null ? "none" : name) {
            case "gzip": return Compression.gzip().build();
            case "snappy": return Compression.snappy().build();
            case "lz4": return Compression.lz4().build();
            case "zstd": return Compression.zstd().build();
            default: return Compression.NONE;
        }
    }

    /** Appends the batches to a segment file through {@code FileRecords}, the class the broker's log writes with. */
    static void writeSegment(File file, List<ByteBuffer> batches) throws IOException {
        file.getParentFile().mkdirs();
        try (FileRecords records = FileRecords.open(file)) {
            for (ByteBuffer batch : batches) records.append(MemoryRecords.readableRecords(batch.duplicate()));
            records.flush();
        }
    }

    /** Every batch of a segment file, read back with {@code FileRecords.batches()} as kafka-dump-log reads it. */
    static List<LogBatch> readSegment(File file) throws IOException {
        List<LogBatch> out = new ArrayList<>();
        try (FileRecords records = FileRecords.open(file, false)) {
            for (FileLogInputStream.FileChannelRecordBatch batch : records.batches()) {
                LogBatch b = new LogBatch(batch.baseOffset(), batch.lastOffset(), batch.maxTimestamp(), batch.producerId(),
                    batch.producerEpoch(), batch.isTransactional(), batch.isControlBatch());
                for (Record record : batch) {
                    byte[] key = record.hasKey() ? bytes(record.key()) : null;
                    byte[] value = record.hasValue() ? bytes(record.value()) : null;
                    if (batch.isControlBatch()) {
                        b.controlType = ControlRecordType.parse(record.key()) == ControlRecordType.COMMIT ? "COMMIT" : "ABORT";
                        b.coordinatorEpoch = EndTransactionMarker.deserialize(record).coordinatorEpoch();
                    }
                    b.records.add(new byte[][]{key, value, longBytes(record.offset()), longBytes(record.timestamp())});
                }
                out.add(b);
            }
        }
        return out;
    }

    private static byte[] bytes(ByteBuffer buffer) {
        byte[] out = new byte[buffer.remaining()];
        buffer.duplicate().get(out);
        return out;
    }

    private static byte[] longBytes(long value) {
        return ByteBuffer.allocate(8).putLong(value).array();
    }
}
