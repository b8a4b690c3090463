package offsetsaudit.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.ConsumerGroupHeartbeatRequestData;
import org.apache.kafka.common.message.ConsumerGroupHeartbeatResponseData;
import org.apache.kafka.common.message.HeartbeatRequestData;
import org.apache.kafka.common.message.HeartbeatResponseData;
import org.apache.kafka.common.message.JoinGroupRequestData;
import org.apache.kafka.common.message.JoinGroupResponseData;
import org.apache.kafka.common.message.LeaveGroupRequestData;
import org.apache.kafka.common.message.ShareGroupHeartbeatRequestData;
import org.apache.kafka.common.message.ShareGroupHeartbeatResponseData;
import org.apache.kafka.common.message.SyncGroupRequestData;
import org.apache.kafka.common.message.SyncGroupResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.RequestContext;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorResult;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;

/**
 * The clients of a history, each behaving like Kafka's own client of its protocol: a KIP-848 consumer (heartbeats at
 * the interval the coordinator gives, reconciles a new assignment at once and acknowledges it in its next heartbeat,
 * re-joins at epoch 0 when fenced), a share consumer (KIP-932), and a classic consumer (JoinGroup, the leader's
 * client-side assignment with Kafka's own {@code ConsumerPartitionAssignor}s, SyncGroup, Heartbeat, re-join when a
 * rebalance is in progress). A client that is stopped stops talking; the coordinator's session timeout then removes it.
 */
final class Clients {
    private Clients() { }

    abstract static class Client {
        final Driver driver;
        final String group;
        final String name;
        final String clientId;
        final String host;
        long nextAt = Long.MAX_VALUE;
        boolean alive = true;

        Client(Driver driver, JsonNode step) {
            this.driver = driver;
            this.group = step.get("group").asText();
            this.name = step.path("member").asText("m");
            this.clientId = step.path("client_id").asText(name);
            this.host = step.path("host").asText("localhost");
        }

        abstract void act();

        abstract String kind();

        void stop() {
            alive = false;
            nextAt = Long.MAX_VALUE;
        }

        abstract void leave(JsonNode step);

        /** The partitions this client owns now, by topic name (what it would commit). */
        abstract Map<String, Set<Integer>> ownedByName();

        String memberIdForCommit() {
            return "";
        }

        int epochForCommit() {
            return -1;
        }

        String instanceIdForCommit() {
            return null;
        }

        void subscribe(JsonNode step) {
            throw new IllegalArgumentException(kind() + " clients do not change subscriptions this way");
        }

        RequestContext context(ApiKeys api) {
            return Coordinator.context(api, clientId, host);
        }

        RequestContext context(ApiKeys api, short version) {
            return Coordinator.context(api, version, clientId, host);
        }

        long now() {
            return driver.coordinator.clock.milliseconds();
        }

        ObjectNode detail() {
            ObjectNode d = Coordinator.JSON.objectNode();
            d.put("group", group);
            d.put("member", name);
            return d;
        }
    }

    static List<String> strings(JsonNode array) {
        if (array == null || array.isNull() || array.isMissingNode()) return null;
        List<String> out = new ArrayList<>();
        for (JsonNode n : array) out.add(n.asText());
        return out;
    }

    static String textOrNull(JsonNode step, String field) {
        JsonNode n = step.get(field);
        return n == null || n.isNull() ? null : n.asText();
    }

    // -- KIP-848 consumer ------------------------------------------------------------------------------------------

    static final class Consumer extends Client {
        final String memberId;
        int epoch;
        final String instanceId;
        final String rackId;
        List<String> topics;
        String regex;
        String assignor;
        final int rebalanceTimeoutMs;
        final int reconcileDelayMs;
        Map<Uuid, Set<Integer>> owned = new LinkedHashMap<>();
        boolean full = true;
        boolean subscriptionChanged;
        boolean ownedChanged;

        Consumer(Driver driver, JsonNode step) {
            super(driver, step);
            this.memberId = driver.newId();
            this.instanceId = textOrNull(step, "instance");
            this.rackId = textOrNull(step, "rack");
            this.topics = strings(step.get("topics"));
            this.regex = textOrNull(step, "regex");
            if (topics == null && regex == null) topics = new ArrayList<>();
            this.assignor = textOrNull(step, "assignor");
            this.rebalanceTimeoutMs = step.path("rebalance_timeout_ms").asInt(300_000);
            this.reconcileDelayMs = step.path("reconcile_ms").asInt(10);
            this.nextAt = now();
        }

        @Override
        String kind() {
            return "consumer";
        }

        @Override
        void act() {
            heartbeat(epoch);
        }

        @Override
        void subscribe(JsonNode step) {
            if (step.has("topics")) {
                topics = strings(step.get("topics"));
                regex = null;
            }
            if (step.has("regex")) {
                regex = textOrNull(step, "regex");
                if (regex != null) topics = null;
            }
            if (step.has("assignor")) assignor = textOrNull(step, "assignor");
            subscriptionChanged = true;
            nextAt = now();
        }

        @Override
        void leave(JsonNode step) {
            boolean temporary = step.path("temporary").asBoolean(false) && instanceId != null;
            heartbeat(temporary ? -2 : -1);
            stop();
        }

        private void heartbeat(int requestEpoch) {
            ConsumerGroupHeartbeatRequestData request = new ConsumerGroupHeartbeatRequestData()
                .setGroupId(group).setMemberId(memberId).setMemberEpoch(requestEpoch).setInstanceId(instanceId);
            boolean joining = requestEpoch == 0;
            if (joining || full) {
                request.setRackId(rackId).setRebalanceTimeoutMs(rebalanceTimeoutMs).setServerAssignor(assignor);
            }
            if (joining || full || subscriptionChanged) {
                if (regex != null) request.setSubscribedTopicRegex(regex);
                else request.setSubscribedTopicNames(topics);
                request.setServerAssignor(assignor);
            }
            if (joining) {
                request.setTopicPartitions(new ArrayList<>());
            } else if (requestEpoch > 0 && (full || ownedChanged)) {
                List<ConsumerGroupHeartbeatRequestData.TopicPartitions> tps = new ArrayList<>();
                owned.forEach((id, ps) -> tps.add(new ConsumerGroupHeartbeatRequestData.TopicPartitions()
                    .setTopicId(id).setPartitions(new ArrayList<>(ps))));
                request.setTopicPartitions(tps);
            }
            long before = driver.coordinator.nextOffset;
            ConsumerGroupHeartbeatResponseData response;
            try {
                response = driver.coordinator.write(() -> driver.coordinator.shard.consumerGroupHeartbeat(
                    context(ApiKeys.CONSUMER_GROUP_HEARTBEAT), request));
            } catch (RuntimeException e) {
                response = new ConsumerGroupHeartbeatResponseData().setErrorCode(Coordinator.errorOf(e).code())
                    .setErrorMessage(e.getMessage());
            }
            ObjectNode d = detail();
            d.put("member_id", memberId);
            d.put("request_epoch", requestEpoch);
            d.put("error", response.errorCode());
            d.put("member_epoch", response.memberEpoch());
            driver.coordinator.event("consumer-heartbeat", before, d);
            if (requestEpoch < 0) return;
            Errors error = Errors.forCode(response.errorCode());
            if (error == Errors.NONE) {
                full = false;
                subscriptionChanged = false;
                ownedChanged = false;
                epoch = response.memberEpoch();
                nextAt = now() + Math.max(1, response.heartbeatIntervalMs());
                if (response.assignment() != null) {
                    Map<Uuid, Set<Integer>> assigned = new LinkedHashMap<>();
                    for (ConsumerGroupHeartbeatResponseData.TopicPartitions tp : response.assignment().topicPartitions())
                        assigned.put(tp.topicId(), new TreeSet<>(tp.partitions()));
                    if (!assigned.equals(owned)) {
                        owned = assigned;
                        ownedChanged = true;
                        nextAt = now() + reconcileDelayMs;
                    }
                }
            } else if (error == Errors.FENCED_MEMBER_EPOCH || error == Errors.UNKNOWN_MEMBER_ID) {
                epoch = 0;
                owned = new LinkedHashMap<>();
                full = true;
                nextAt = now() + reconcileDelayMs;
            } else if (error == Errors.COORDINATOR_NOT_AVAILABLE || error == Errors.NOT_COORDINATOR
                || error == Errors.COORDINATOR_LOAD_IN_PROGRESS) {
                nextAt = now() + 1000;
            } else {
                driver.error(this, error, response.errorMessage());
                stop();
            }
        }

        @Override
        Map<String, Set<Integer>> ownedByName() {
            return driver.byName(owned);
        }

        @Override
        String memberIdForCommit() {
            return memberId;
        }

        @Override
        int epochForCommit() {
            return epoch;
        }
    }

    // -- KIP-932 share consumer ------------------------------------------------------------------------------------

    static final class Share extends Client {
        final String memberId;
        int epoch;
        final String rackId;
        List<String> topics;
        boolean full = true;
        boolean subscriptionChanged;
        Map<Uuid, Set<Integer>> owned = new LinkedHashMap<>();

        Share(Driver driver, JsonNode step) {
            super(driver, step);
            this.memberId = driver.newId();
            this.rackId = textOrNull(step, "rack");
            this.topics = strings(step.get("topics"));
            this.nextAt = now();
        }

        @Override
        String kind() {
            return "share";
        }

        @Override
        void act() {
            heartbeat(epoch);
        }

        @Override
        void subscribe(JsonNode step) {
            topics = strings(step.get("topics"));
            subscriptionChanged = true;
            nextAt = now();
        }

        @Override
        void leave(JsonNode step) {
            heartbeat(-1);
            stop();
        }

        private void heartbeat(int requestEpoch) {
            ShareGroupHeartbeatRequestData request = new ShareGroupHeartbeatRequestData().setGroupId(group)
                .setMemberId(memberId).setMemberEpoch(requestEpoch);
            if (requestEpoch == 0 || full) request.setRackId(rackId);
            if (requestEpoch == 0 || full || subscriptionChanged) request.setSubscribedTopicNames(topics);
            long before = driver.coordinator.nextOffset;
            ShareGroupHeartbeatResponseData response;
            Map<Uuid, Set<Integer>> initialise = null;
            try {
                Object[] holder = new Object[1];
                Object[] answer = Compat.shareHeartbeat(driver.coordinator.shard, context(ApiKeys.SHARE_GROUP_HEARTBEAT),
                    request, holder);
                @SuppressWarnings("unchecked")
                CoordinatorResult<Object, CoordinatorRecord> result = (CoordinatorResult<Object, CoordinatorRecord>) holder[0];
                driver.coordinator.complete(result, -1L, (short) -1);
                response = (ShareGroupHeartbeatResponseData) answer[0];
                @SuppressWarnings("unchecked")
                Map<Uuid, Set<Integer>> init = (Map<Uuid, Set<Integer>>) answer[1];
                initialise = init;
            } catch (RuntimeException e) {
                response = new ShareGroupHeartbeatResponseData().setErrorCode(Coordinator.errorOf(e).code())
                    .setErrorMessage(e.getMessage());
            }
            ObjectNode d = detail();
            d.put("member_id", memberId);
            d.put("request_epoch", requestEpoch);
            d.put("error", response.errorCode());
            d.put("member_epoch", response.memberEpoch());
            driver.coordinator.event("share-heartbeat", before, d);
            if (initialise != null && !initialise.isEmpty()) driver.initialiseShareState(group, initialise);
            if (requestEpoch < 0) return;
            Errors error = Errors.forCode(response.errorCode());
            if (error == Errors.NONE) {
                full = false;
                subscriptionChanged = false;
                epoch = response.memberEpoch();
                nextAt = now() + Math.max(1, response.heartbeatIntervalMs());
                if (response.assignment() != null) {
                    Map<Uuid, Set<Integer>> assigned = new LinkedHashMap<>();
                    for (ShareGroupHeartbeatResponseData.TopicPartitions tp : response.assignment().topicPartitions())
                        assigned.put(tp.topicId(), new TreeSet<>(tp.partitions()));
                    owned = assigned;
                }
            } else if (error == Errors.FENCED_MEMBER_EPOCH || error == Errors.UNKNOWN_MEMBER_ID) {
                epoch = 0;
                owned = new LinkedHashMap<>();
                full = true;
                nextAt = now() + 10;
            } else {
                driver.error(this, error, response.errorMessage());
                stop();
            }
        }

        @Override
        Map<String, Set<Integer>> ownedByName() {
            return driver.byName(owned);
        }
    }

    // -- classic consumer (JoinGroup / SyncGroup / Heartbeat / LeaveGroup) -----------------------------------------

    static final class Classic extends Client {
        String memberId = "";
        final String instanceId;
        final String protocolType;
        List<String> assignors;
        List<String> topics;
        final int sessionTimeoutMs;
        final int rebalanceTimeoutMs;
        final int heartbeatIntervalMs;
        int generation = -1;
        String protocol;
        String leader;
        Map<String, Set<Integer>> owned = new TreeMap<>();
        boolean waiting;
        boolean rejoinAfterSync;
        final boolean stalling;
        final String rackId;

        Classic(Driver driver, JsonNode step) {
            super(driver, step);
            this.instanceId = textOrNull(step, "instance");
            this.protocolType = step.path("protocol_type").asText("consumer");
            List<String> a = strings(step.get("assignors"));
            this.assignors = a == null ? Collections.singletonList("range") : a;
            this.topics = strings(step.get("topics"));
            if (topics == null) topics = new ArrayList<>();
            this.sessionTimeoutMs = step.path("session_timeout_ms").asInt(45_000);
            this.rebalanceTimeoutMs = step.path("rebalance_timeout_ms").asInt(60_000);
            this.heartbeatIntervalMs = step.path("heartbeat_interval_ms").asInt(3_000);
            this.stalling = step.path("never_sync").asBoolean(false);
            this.rackId = textOrNull(step, "rack");
            this.nextAt = now();
        }

        @Override
        String kind() {
            return "classic";
        }

        @Override
        void act() {
            if (waiting) {
                nextAt = Long.MAX_VALUE;
                return;
            }
            if (generation < 0) join();
            else heartbeat();
        }

        @Override
        void subscribe(JsonNode step) {
            topics = strings(step.get("topics"));
            if (step.has("assignors")) assignors = strings(step.get("assignors"));
            if (!waiting) {
                generation = -1;
                nextAt = now();
            } else {
                rejoinAfterSync = true;
            }
        }

        private byte[] subscriptionBytes(String assignorName) {
            List<TopicPartition> ownedPartitions = new ArrayList<>();
            owned.forEach((t, ps) -> ps.forEach(p -> ownedPartitions.add(new TopicPartition(t, p))));
            ConsumerPartitionAssignor.Subscription subscription = new ConsumerPartitionAssignor.Subscription(
                new ArrayList<>(topics), null, assignorName.startsWith("cooperative") ? ownedPartitions : Collections.emptyList(),
                generation, java.util.Optional.ofNullable(rackId));
            ByteBuffer buffer = ConsumerProtocol.serializeSubscription(subscription);
            byte[] out = new byte[buffer.remaining()];
            buffer.get(out);
            return out;
        }

        private void join() {
            JoinGroupRequestData.JoinGroupRequestProtocolCollection protocols = new JoinGroupRequestData.JoinGroupRequestProtocolCollection();
            for (String a : assignors)
                protocols.add(new JoinGroupRequestData.JoinGroupRequestProtocol().setName(a).setMetadata(subscriptionBytes(a)));
            JoinGroupRequestData request = new JoinGroupRequestData().setGroupId(group).setSessionTimeoutMs(sessionTimeoutMs)
                .setRebalanceTimeoutMs(rebalanceTimeoutMs).setMemberId(memberId).setGroupInstanceId(instanceId)
                .setProtocolType(protocolType).setProtocols(protocols).setReason("oracle join");
            CompletableFuture<JoinGroupResponseData> future = new CompletableFuture<>();
            waiting = true;
            nextAt = Long.MAX_VALUE;
            future.whenComplete((response, error) -> driver.later(() -> onJoin(response, error)));
            long before = driver.coordinator.nextOffset;
            try {
                driver.coordinator.write(() -> Compat.classicJoin(driver.coordinator.shard, context(ApiKeys.JOIN_GROUP),
                    request, future));
            } catch (RuntimeException e) {
                if (!future.isDone()) future.complete(new JoinGroupResponseData().setErrorCode(Coordinator.errorOf(e).code())
                    .setMemberId(memberId));
            }
            ObjectNode d = detail();
            d.put("member_id", memberId);
            driver.coordinator.event("classic-join", before, d);
        }

        private void onJoin(JoinGroupResponseData response, Throwable error) {
            if (!alive) return;
            waiting = false;
            Errors e = error != null ? Coordinator.errorOf(error) : Errors.forCode(response.errorCode());
            ObjectNode d = detail();
            d.put("error", e.code());
            if (response != null) {
                d.put("member_id", response.memberId());
                d.put("generation", response.generationId());
            }
            driver.coordinator.event("classic-join-response", driver.coordinator.nextOffset, d);
            if (e == Errors.MEMBER_ID_REQUIRED) {
                memberId = response.memberId();
                nextAt = now();
                return;
            }
            if (e == Errors.UNKNOWN_MEMBER_ID) {
                memberId = "";
                generation = -1;
                nextAt = now() + 100;
                return;
            }
            if (e == Errors.REBALANCE_IN_PROGRESS || e == Errors.COORDINATOR_NOT_AVAILABLE) {
                generation = -1;
                nextAt = now() + 100;
                return;
            }
            if (e != Errors.NONE) {
                driver.error(this, e, null);
                stop();
                return;
            }
            memberId = response.memberId();
            generation = response.generationId();
            protocol = response.protocolName();
            leader = response.leader();
            if (stalling) {
                nextAt = Long.MAX_VALUE;
                return;
            }
            List<SyncGroupRequestData.SyncGroupRequestAssignment> assignments = new ArrayList<>();
            if (memberId.equals(leader)) assignments = assign(response);
            sync(assignments);
        }

        private List<SyncGroupRequestData.SyncGroupRequestAssignment> assign(JoinGroupResponseData response) {
            ConsumerPartitionAssignor assignor = clientAssignor(protocol);
            Map<String, ConsumerPartitionAssignor.Subscription> subscriptions = new LinkedHashMap<>();
            Set<String> allTopics = new TreeSet<>();
            for (JoinGroupResponseData.JoinGroupResponseMember m : response.members()) {
                ConsumerPartitionAssignor.Subscription s = ConsumerProtocol.deserializeSubscription(ByteBuffer.wrap(m.metadata()));
                if (m.groupInstanceId() != null) s.setGroupInstanceId(java.util.Optional.of(m.groupInstanceId()));
                subscriptions.put(m.memberId(), s);
                allTopics.addAll(s.topics());
            }
            List<PartitionInfo> partitions = new ArrayList<>();
            Node node = new Node(0, "localhost", 9092);
            for (String t : allTopics) {
                Cluster.Topic topic = driver.cluster.topics.get(t);
                if (topic == null) continue;
                for (int p = 0; p < topic.partitions; p++)
                    partitions.add(new PartitionInfo(t, p, node, new Node[]{node}, new Node[]{node}));
            }
            org.apache.kafka.common.Cluster metadata = new org.apache.kafka.common.Cluster("oracle",
                Collections.singletonList(node), partitions, Collections.emptySet(), Collections.emptySet());
            ConsumerPartitionAssignor.GroupAssignment result = assignor.assign(metadata,
                new ConsumerPartitionAssignor.GroupSubscription(subscriptions));
            List<SyncGroupRequestData.SyncGroupRequestAssignment> out = new ArrayList<>();
            result.groupAssignment().forEach((member, assignment) -> {
                ByteBuffer buffer = ConsumerProtocol.serializeAssignment(assignment);
                byte[] bytes = new byte[buffer.remaining()];
                buffer.get(bytes);
                out.add(new SyncGroupRequestData.SyncGroupRequestAssignment().setMemberId(member).setAssignment(bytes));
            });
            return out;
        }

        private void sync(List<SyncGroupRequestData.SyncGroupRequestAssignment> assignments) {
            SyncGroupRequestData request = new SyncGroupRequestData().setGroupId(group).setMemberId(memberId)
                .setGenerationId(generation).setGroupInstanceId(instanceId).setProtocolType(protocolType)
                .setProtocolName(protocol).setAssignments(assignments);
            CompletableFuture<SyncGroupResponseData> future = new CompletableFuture<>();
            waiting = true;
            future.whenComplete((response, error) -> driver.later(() -> onSync(response, error)));
            long before = driver.coordinator.nextOffset;
            try {
                driver.coordinator.write(() -> driver.coordinator.shard.classicGroupSync(context(ApiKeys.SYNC_GROUP), request, future));
            } catch (RuntimeException e) {
                if (!future.isDone()) future.complete(new SyncGroupResponseData().setErrorCode(Coordinator.errorOf(e).code()));
            }
            ObjectNode d = detail();
            d.put("member_id", memberId);
            d.put("generation", generation);
            d.put("leader", memberId.equals(leader));
            driver.coordinator.event("classic-sync", before, d);
        }

        private void onSync(SyncGroupResponseData response, Throwable error) {
            if (!alive) return;
            waiting = false;
            Errors e = error != null ? Coordinator.errorOf(error) : Errors.forCode(response.errorCode());
            ObjectNode d = detail();
            d.put("error", e.code());
            driver.coordinator.event("classic-sync-response", driver.coordinator.nextOffset, d);
            if (e == Errors.NONE) {
                Map<String, Set<Integer>> assigned = new TreeMap<>();
                if (response.assignment() != null && response.assignment().length > 0) {
                    ConsumerPartitionAssignor.Assignment a = ConsumerProtocol.deserializeAssignment(ByteBuffer.wrap(response.assignment()));
                    for (TopicPartition tp : a.partitions()) assigned.computeIfAbsent(tp.topic(), k -> new TreeSet<>()).add(tp.partition());
                }
                boolean revoked = false;
                for (Map.Entry<String, Set<Integer>> o : owned.entrySet())
                    for (int p : o.getValue())
                        if (!assigned.getOrDefault(o.getKey(), Collections.emptySet()).contains(p)) revoked = true;
                owned = assigned;
                if (rejoinAfterSync || (revoked && protocol != null && protocol.startsWith("cooperative"))) {
                    rejoinAfterSync = false;
                    generation = -1;
                    nextAt = now();
                } else {
                    nextAt = now() + heartbeatIntervalMs;
                }
            } else if (e == Errors.UNKNOWN_MEMBER_ID) {
                memberId = "";
                generation = -1;
                nextAt = now() + 100;
            } else if (e == Errors.REBALANCE_IN_PROGRESS || e == Errors.ILLEGAL_GENERATION) {
                generation = -1;
                nextAt = now() + 100;
            } else {
                driver.error(this, e, null);
                stop();
            }
        }

        private void heartbeat() {
            HeartbeatRequestData request = new HeartbeatRequestData().setGroupId(group).setMemberId(memberId)
                .setGenerationId(generation).setGroupInstanceId(instanceId);
            long before = driver.coordinator.nextOffset;
            HeartbeatResponseData response;
            try {
                response = driver.coordinator.write(() -> driver.coordinator.shard.classicGroupHeartbeat(context(ApiKeys.HEARTBEAT), request));
            } catch (RuntimeException e) {
                response = new HeartbeatResponseData().setErrorCode(Coordinator.errorOf(e).code());
            }
            Errors e = Errors.forCode(response.errorCode());
            ObjectNode d = detail();
            d.put("member_id", memberId);
            d.put("error", e.code());
            driver.coordinator.event("classic-heartbeat", before, d);
            if (e == Errors.NONE) {
                nextAt = now() + heartbeatIntervalMs;
            } else if (e == Errors.REBALANCE_IN_PROGRESS || e == Errors.ILLEGAL_GENERATION) {
                if (!protocolIsCooperative()) owned = new TreeMap<>();
                generation = -1;
                nextAt = now();
            } else if (e == Errors.UNKNOWN_MEMBER_ID || e == Errors.FENCED_INSTANCE_ID) {
                owned = new TreeMap<>();
                memberId = "";
                generation = -1;
                nextAt = now() + 100;
            } else {
                driver.error(this, e, null);
                stop();
            }
        }

        private boolean protocolIsCooperative() {
            return protocol != null && protocol.startsWith("cooperative");
        }

        @Override
        void leave(JsonNode step) {
            LeaveGroupRequestData request = new LeaveGroupRequestData().setGroupId(group).setMembers(Collections.singletonList(
                new LeaveGroupRequestData.MemberIdentity().setMemberId(memberId).setGroupInstanceId(instanceId)
                    .setReason("oracle leave")));
            long before = driver.coordinator.nextOffset;
            short code = 0;
            try {
                driver.coordinator.write(() -> driver.coordinator.shard.classicGroupLeave(context(ApiKeys.LEAVE_GROUP), request));
            } catch (RuntimeException e) {
                code = Coordinator.errorOf(e).code();
            }
            ObjectNode d = detail();
            d.put("member_id", memberId);
            d.put("error", code);
            driver.coordinator.event("classic-leave", before, d);
            stop();
        }

        @Override
        Map<String, Set<Integer>> ownedByName() {
            return owned;
        }

        @Override
        String memberIdForCommit() {
            return memberId;
        }

        @Override
        int epochForCommit() {
            return generation;
        }

        @Override
        String instanceIdForCommit() {
            return instanceId;
        }
    }

    static ConsumerPartitionAssignor clientAssignor(String name) {
        switch (name) {
            case "roundrobin": return new RoundRobinAssignor();
            case "sticky": return new StickyAssignor();
            case "cooperative-sticky": return new CooperativeStickyAssignor();
            default: return new RangeAssignor();
        }
    }

    static Map<String, Set<Integer>> emptyOwned() {
        return new HashMap<>();
    }
}
