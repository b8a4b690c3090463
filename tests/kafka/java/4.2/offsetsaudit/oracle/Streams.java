package offsetsaudit.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.message.StreamsGroupDescribeResponseData;
import org.apache.kafka.common.message.StreamsGroupDescribeResponseDataJsonConverter;
import org.apache.kafka.common.message.StreamsGroupHeartbeatRequestData;
import org.apache.kafka.common.message.StreamsGroupHeartbeatResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorResult;
import org.apache.kafka.coordinator.group.GroupCoordinatorShard;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Streams groups (KIP-1071): a client that behaves like a Kafka Streams thread (joins with its topology, reconciles
 * the active, standby and warm-up tasks it is given at once and acknowledges them, re-joins at epoch 0 when fenced),
 * and the internal topics the broker creates when a heartbeat asks for them. Streams groups are describe-able only
 * from Kafka 4.2 on.
 */
final class Streams {
    private Streams() { }

    static Clients.Client client(Driver driver, JsonNode step) {
        return new Client(driver, step);
    }

    static ArrayNode describe(GroupCoordinatorShard shard, List<String> groups, long offset) {
        ArrayNode a = Coordinator.JSON.arrayNode();
        for (StreamsGroupDescribeResponseData.DescribedGroup g : Compat.streamsDescribe(shard, groups, offset))
            a.add(StreamsGroupDescribeResponseDataJsonConverter.DescribedGroupJsonConverter.write(g,
                StreamsGroupDescribeResponseData.HIGHEST_SUPPORTED_VERSION));
        return a;
    }

    static StreamsGroupHeartbeatRequestData.Topology topology(JsonNode node) {
        List<StreamsGroupHeartbeatRequestData.Subtopology> subtopologies = new ArrayList<>();
        for (JsonNode s : node.path("subtopologies")) {
            List<StreamsGroupHeartbeatRequestData.TopicInfo> changelogs = new ArrayList<>();
            for (JsonNode c : s.path("changelog_topics"))
                changelogs.add(new StreamsGroupHeartbeatRequestData.TopicInfo().setName(c.asText()).setPartitions(0)
                    .setReplicationFactor((short) 1));
            List<StreamsGroupHeartbeatRequestData.TopicInfo> repartitionSources = new ArrayList<>();
            for (JsonNode r : s.path("repartition_source_topics"))
                repartitionSources.add(new StreamsGroupHeartbeatRequestData.TopicInfo().setName(r.get("name").asText())
                    .setPartitions(r.path("partitions").asInt(0)).setReplicationFactor((short) 1));
            List<String> sinks = Clients.strings(s.get("repartition_sink_topics"));
            subtopologies.add(new StreamsGroupHeartbeatRequestData.Subtopology()
                .setSubtopologyId(s.get("id").asText())
                .setSourceTopics(Clients.strings(s.get("source_topics")))
                .setStateChangelogTopics(changelogs)
                .setRepartitionSinkTopics(sinks == null ? new ArrayList<>() : sinks)
                .setRepartitionSourceTopics(repartitionSources));
        }
        return new StreamsGroupHeartbeatRequestData.Topology().setEpoch(node.path("epoch").asInt(0)).setSubtopologies(subtopologies);
    }

    static final class Client extends Clients.Client {
        final String memberId;
        final String processId;
        final String rackId;
        final JsonNode topologyNode;
        final Map<String, String> clientTags = new TreeMap<>();
        final int rebalanceTimeoutMs;
        int epoch;
        boolean tasksChanged;
        Map<String, Set<Integer>> active = new TreeMap<>();
        Map<String, Set<Integer>> standby = new TreeMap<>();
        Map<String, Set<Integer>> warmup = new TreeMap<>();

        Client(Driver driver, JsonNode step) {
            super(driver, step);
            this.memberId = driver.newId();
            String process = step.path("process").asText(name);
            Object known = driver.streamsState().get("process:" + group + ":" + process);
            if (known == null) {
                known = new java.util.UUID(driver.random.nextLong(), driver.random.nextLong()).toString();
                driver.streamsState().put("process:" + group + ":" + process, known);
            }
            this.processId = (String) known;
            this.rackId = Clients.textOrNull(step, "rack");
            this.topologyNode = step.get("topology");
            step.path("client_tags").fields().forEachRemaining(e -> clientTags.put(e.getKey(), e.getValue().asText()));
            this.rebalanceTimeoutMs = step.path("rebalance_timeout_ms").asInt(300_000);
            this.nextAt = now();
        }

        @Override
        String kind() {
            return "streams";
        }

        @Override
        void act() {
            heartbeat(epoch);
        }

        @Override
        void leave(JsonNode step) {
            heartbeat(-1);
            stop();
        }

        private static List<StreamsGroupHeartbeatRequestData.TaskIds> tasks(Map<String, Set<Integer>> tasks) {
            List<StreamsGroupHeartbeatRequestData.TaskIds> out = new ArrayList<>();
            tasks.forEach((s, ps) -> out.add(new StreamsGroupHeartbeatRequestData.TaskIds().setSubtopologyId(s)
                .setPartitions(new ArrayList<>(ps))));
            return out;
        }

        private static Map<String, Set<Integer>> tasks(List<StreamsGroupHeartbeatResponseData.TaskIds> tasks) {
            Map<String, Set<Integer>> out = new TreeMap<>();
            for (StreamsGroupHeartbeatResponseData.TaskIds t : tasks) out.put(t.subtopologyId(), new TreeSet<>(t.partitions()));
            return out;
        }

        private void heartbeat(int requestEpoch) {
            StreamsGroupHeartbeatRequestData request = new StreamsGroupHeartbeatRequestData().setGroupId(group)
                .setMemberId(memberId).setMemberEpoch(requestEpoch).setEndpointInformationEpoch(0);
            if (requestEpoch == 0) {
                List<StreamsGroupHeartbeatRequestData.KeyValue> tags = new ArrayList<>();
                clientTags.forEach((k, v) -> tags.add(new StreamsGroupHeartbeatRequestData.KeyValue().setKey(k).setValue(v)));
                request.setRackId(rackId).setRebalanceTimeoutMs(rebalanceTimeoutMs).setTopology(topology(topologyNode))
                    .setProcessId(processId).setClientTags(tags)
                    .setActiveTasks(new ArrayList<>()).setStandbyTasks(new ArrayList<>()).setWarmupTasks(new ArrayList<>());
            } else if (requestEpoch > 0 && tasksChanged) {
                request.setActiveTasks(tasks(active)).setStandbyTasks(tasks(standby)).setWarmupTasks(tasks(warmup));
            }
            long before = driver.coordinator.nextOffset;
            StreamsGroupHeartbeatResponseData response;
            Map<String, Integer> creatable = new LinkedHashMap<>();
            try {
                Object[] holder = new Object[1];
                Object[] answer = Compat.streamsHeartbeat(driver.coordinator.shard, context(ApiKeys.STREAMS_GROUP_HEARTBEAT),
                    request, holder);
                @SuppressWarnings("unchecked")
                CoordinatorResult<Object, CoordinatorRecord> result = (CoordinatorResult<Object, CoordinatorRecord>) holder[0];
                driver.coordinator.complete(result, -1L, (short) -1);
                response = (StreamsGroupHeartbeatResponseData) answer[0];
                @SuppressWarnings("unchecked")
                Map<String, Integer> topics = (Map<String, Integer>) answer[1];
                creatable.putAll(topics);
            } catch (RuntimeException e) {
                response = new StreamsGroupHeartbeatResponseData().setErrorCode(Coordinator.errorOf(e).code())
                    .setErrorMessage(e.getMessage());
            }
            ObjectNode d = detail();
            d.put("member_id", memberId);
            d.put("request_epoch", requestEpoch);
            d.put("error", response.errorCode());
            d.put("member_epoch", response.memberEpoch());
            driver.coordinator.event("streams-heartbeat", before, d);
            for (Map.Entry<String, Integer> t : creatable.entrySet()) driver.createTopic(t.getKey(), Math.max(1, t.getValue()));
            if (requestEpoch < 0) return;
            Errors error = Errors.forCode(response.errorCode());
            if (error == Errors.NONE) {
                epoch = response.memberEpoch();
                tasksChanged = false;
                nextAt = now() + Math.max(1, response.heartbeatIntervalMs());
                if (response.activeTasks() != null) {
                    active = tasks(response.activeTasks());
                    standby = tasks(response.standbyTasks());
                    warmup = tasks(response.warmupTasks());
                    tasksChanged = true;
                    nextAt = now() + 10;
                }
                if (!creatable.isEmpty()) nextAt = Math.min(nextAt, now() + 100);
            } else if (error == Errors.FENCED_MEMBER_EPOCH || error == Errors.UNKNOWN_MEMBER_ID) {
                epoch = 0;
                active = new TreeMap<>();
                standby = new TreeMap<>();
                warmup = new TreeMap<>();
                nextAt = now() + 10;
            } else {
                driver.error(this, error, response.errorMessage());
                stop();
            }
        }

        @Override
        Map<String, Set<Integer>> ownedByName() {
            return new TreeMap<>();
        }
    }
}
