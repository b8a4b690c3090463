package offsetsaudit.oracle;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.JoinGroupRequestData;
import org.apache.kafka.common.message.JoinGroupResponseData;
import org.apache.kafka.common.message.ShareGroupHeartbeatRequestData;
import org.apache.kafka.common.message.ShareGroupHeartbeatResponseData;
import org.apache.kafka.common.requests.RequestContext;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.coordinator.common.runtime.CoordinatorExecutor;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorResult;
import org.apache.kafka.coordinator.common.runtime.CoordinatorTimer;
import org.apache.kafka.coordinator.group.GroupConfigManager;
import org.apache.kafka.coordinator.group.GroupCoordinatorConfig;
import org.apache.kafka.coordinator.group.GroupCoordinatorShard;
import org.apache.kafka.coordinator.group.metrics.GroupCoordinatorMetrics;
import org.apache.kafka.coordinator.group.modern.share.ShareGroupConfig;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.timeline.SnapshotRegistry;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * What differs between Kafka versions in the group coordinator's internal API, for Kafka 4.0 (and 4.1): the shard's builder
 * and its metadata-image hooks, share group state initialisation, streams groups and topic deletion (the log's
 * batches and segments are {@link SegmentLog}'s). One copy of this class per range of Kafka versions.
 */
final class Compat {
    private Compat() { }

    static final String KAFKA_LINE = "4.0";
    static final String PROTOCOLS = "classic,consumer,share";
    /** OffsetCommit v9: topics by name (ids came with v10 in Kafka 4.1). */
    static final short OFFSET_COMMIT_VERSION = 9;

    static Map<String, Object> extraBrokerProps() {
        return new HashMap<>();
    }

    static void setCommitTopicId(org.apache.kafka.common.message.OffsetCommitRequestData.OffsetCommitRequestTopic topic, Uuid id) {
        // OffsetCommit v9 has no topic ids.
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
        org.apache.kafka.common.config.ConfigDef definitions = new org.apache.kafka.common.config.ConfigDef();
        for (org.apache.kafka.common.config.ConfigDef part : new org.apache.kafka.common.config.ConfigDef[]{
                GroupCoordinatorConfig.GROUP_COORDINATOR_CONFIG_DEF, GroupCoordinatorConfig.OFFSET_MANAGEMENT_CONFIG_DEF,
                GroupCoordinatorConfig.CLASSIC_GROUP_CONFIG_DEF, GroupCoordinatorConfig.CONSUMER_GROUP_CONFIG_DEF,
                GroupCoordinatorConfig.SHARE_GROUP_CONFIG_DEF, ShareGroupConfig.CONFIG_DEF})
            for (org.apache.kafka.common.config.ConfigDef.ConfigKey key : part.configKeys().values())
                if (!definitions.configKeys().containsKey(key.name)) definitions.define(key);
        ShareGroupConfig shareConfig = new ShareGroupConfig(new org.apache.kafka.common.config.AbstractConfig(definitions, brokerProps, false));
        GroupConfigManager configManager = new GroupConfigManager(config.extractGroupConfigMap(shareConfig));
        LogContext logContext = new LogContext("[oracle " + partition + "] ");
        SnapshotRegistry registry = new SnapshotRegistry(logContext);
        registryOut[0] = registry;
        configManagerOut[0] = configManager;
        GroupCoordinatorShard.Builder builder = new GroupCoordinatorShard.Builder(config, configManager);
        builder.withAuthorizer(Optional.<org.apache.kafka.server.authorizer.Authorizer>empty());
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

    /** The assignors' {@code GroupSpec} as the coordinator builds it (Kafka 4.0 has no assignable-partition filter). */
    static org.apache.kafka.coordinator.group.api.assignor.GroupSpec groupSpec(
            Map<String, org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl> members,
            org.apache.kafka.coordinator.group.api.assignor.SubscriptionType type, Map<Uuid, Map<Integer, String>> inverted,
            Map<Uuid, Set<Integer>> assignable) {
        return new org.apache.kafka.coordinator.group.modern.GroupSpecImpl(members, type, inverted);
    }

    static void idempotentCreateSnapshot(Object registry, long offset) {
        ((SnapshotRegistry) registry).idempotentCreateSnapshot(offset);
    }

    static void deleteSnapshotsUpTo(Object registry, long offset) {
        ((SnapshotRegistry) registry).deleteSnapshotsUpTo(offset);
    }

    static void onLoaded(GroupCoordinatorShard shard, MetadataImage image) {
        shard.onLoaded(image);
    }

    static void onMetadataUpdate(GroupCoordinatorShard shard, MetadataDelta delta, MetadataImage image) {
        shard.onNewMetadataImage(image, delta);
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

    /** A share heartbeat's response; Kafka 4.0 keeps no share partition state in the group coordinator. */
    static Object[] shareHeartbeat(GroupCoordinatorShard shard, RequestContext context, ShareGroupHeartbeatRequestData request,
                                   Object[] resultOut) {
        CoordinatorResult<ShareGroupHeartbeatResponseData, CoordinatorRecord> result = shard.shareGroupHeartbeat(context, request);
        resultOut[0] = result;
        return new Object[]{result.response(), null};
    }

    static CoordinatorResult<Void, CoordinatorRecord> initializeShareGroupState(GroupCoordinatorShard shard, String groupId,
                                                                                Map<Uuid, Set<Integer>> partitions) {
        throw new UnsupportedOperationException("Kafka 4.0 has no share group state records");
    }
}
