package offsetsaudit.oracle;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.internals.Plugin;
import org.apache.kafka.common.message.JoinGroupRequestData;
import org.apache.kafka.common.message.JoinGroupResponseData;
import org.apache.kafka.common.message.ShareGroupHeartbeatRequestData;
import org.apache.kafka.common.message.ShareGroupHeartbeatResponseData;
import org.apache.kafka.common.message.StreamsGroupDescribeResponseData;
import org.apache.kafka.common.message.StreamsGroupHeartbeatRequestData;
import org.apache.kafka.common.requests.RequestContext;
import org.apache.kafka.common.utils.internals.LogContext;
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

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * What differs between Kafka versions in the group coordinator's internal API, for Kafka 4.4: the shard's builder
 * and its metadata-image hooks, share group state initialisation, streams groups and topic deletion (the log's
 * batches and segments are {@link SegmentLog}'s). One copy of this class per range of Kafka versions.
 */
final class Compat {
    private Compat() { }

    static final String KAFKA_LINE = "4.4";
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
        request.setGenerationIdOrMemberEpoch(generation);
    }

    static org.apache.kafka.common.message.OffsetFetchResponseData.OffsetFetchResponseGroup fetchAllOffsets(
            GroupCoordinatorShard shard, org.apache.kafka.common.message.OffsetFetchRequestData.OffsetFetchRequestGroup request,
            long offset) {
        return shard.fetchOffsets(request, offset);
    }

    /** The shard built the way {@code GroupCoordinatorService} builds one through {@code GroupCoordinatorShard.Builder}. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static GroupCoordinatorShard buildShard(Map<String, Object> brokerProps, ManualClock clock, CoordinatorTimer timer,
                                            CoordinatorExecutor executor, int partition, Object[] registryOut,
                                            Object[] configManagerOut) {
        GroupCoordinatorConfig config = GroupCoordinatorConfig.fromProps(brokerProps);
        ShareGroupConfig shareConfig = ShareGroupConfig.fromProps(brokerProps);
        GroupConfigManager configManager = new GroupConfigManager(config, shareConfig);
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
        shard.onMetadataUpdate(new KRaftCoordinatorMetadataDelta(delta), new KRaftCoordinatorMetadataImage(image));
    }

    /** The records Kafka writes when topics are deleted (offsets of their partitions, share state). */
    static CoordinatorResult<Void, CoordinatorRecord> onTopicsDeleted(GroupCoordinatorShard shard, Map<Uuid, String> topics,
                                                                      Map<Uuid, Integer> partitions) {
        List<GroupCoordinatorShard.DeletedTopic> deleted = new ArrayList<>();
        topics.forEach((id, name) -> deleted.add(new GroupCoordinatorShard.DeletedTopic(id, name)));
        return shard.onTopicsDeleted(deleted);
    }

    static CoordinatorResult<?, CoordinatorRecord> classicJoin(GroupCoordinatorShard shard, RequestContext context,
                                                               JoinGroupRequestData request,
                                                               CompletableFuture<JoinGroupResponseData> future) {
        return shard.classicGroupJoin(context, request, future, true);
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
        return shard.streamsGroupDescribe(groups, offset).describedGroups();
    }
}
