package offsetsaudit.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.DeleteGroupsResponseData;
import org.apache.kafka.common.message.OffsetCommitRequestData;
import org.apache.kafka.common.message.OffsetCommitResponseData;
import org.apache.kafka.common.message.OffsetDeleteRequestData;
import org.apache.kafka.common.message.OffsetDeleteResponseData;
import org.apache.kafka.common.message.TxnOffsetCommitRequestData;
import org.apache.kafka.common.message.TxnOffsetCommitResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.image.MetadataDelta;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Plays one scenario against one coordinator shard: the cluster's metadata, the broker's and groups' configs, the
 * clients and the admin actions of each step at its time, and between steps everything that happens on its own (the
 * clients' heartbeats, the coordinator's timers and background tasks). The scenario format is documented in
 * docs/oracle.md.
 */
final class Driver {
    final JsonNode scenario;
    final String name;
    final Coordinator coordinator;
    final Cluster cluster = new Cluster();
    final Random random;
    final ArrayNode events = Coordinator.JSON.arrayNode();
    final ArrayNode errors = Coordinator.JSON.arrayNode();
    final long startMs;
    private final Map<String, Clients.Client> clients = new LinkedHashMap<>();
    private final List<Clients.Client> live = new ArrayList<>();
    private final Deque<Runnable> inbox = new ArrayDeque<>();
    private final Map<String, Long> nextCommittedOffset = new HashMap<>();
    private final Map<String, Object> streamsState = new HashMap<>();

    Driver(JsonNode scenario) {
        this.scenario = scenario;
        this.name = scenario.path("name").asText("history");
        this.random = new Random(scenario.path("seed").asLong(1));
        this.startMs = scenario.path("start_ms").asLong(1_754_000_000_000L);
        Map<String, Object> props = Defaults.brokerProps();
        scenario.path("broker").fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
        if (scenario.path("record_assignor_inputs").asBoolean(false)) RecordingAssignors.wrap(props);
        this.coordinator = new Coordinator(scenario.path("partition").asInt(0), props, startMs,
            scenario.path("compression").asText("none"), scenario.path("epochs").asBoolean(true),
            scenario.path("events").asBoolean(true) ? events : null);
    }

    String newId() {
        return new Uuid(random.nextLong(), random.nextLong()).toString();
    }

    void later(Runnable action) {
        inbox.add(action);
    }

    void error(Clients.Client client, Errors error, String message) {
        ObjectNode e = client.detail();
        e.put("time_ms", coordinator.clock.milliseconds());
        e.put("kind", client.kind());
        e.put("error", error.name());
        e.put("message", message);
        errors.add(e);
    }

    Map<String, Set<Integer>> byName(Map<Uuid, Set<Integer>> byId) {
        Map<String, Set<Integer>> out = new TreeMap<>();
        byId.forEach((id, ps) -> {
            for (Cluster.Topic t : cluster.topics.values()) if (t.id.equals(id)) out.put(t.name, ps);
        });
        return out;
    }

    // -- the run ---------------------------------------------------------------------------------------------------

    ObjectNode run() {
        ArrayNode assignorCalls = Coordinator.JSON.arrayNode();
        RecordingAssignors.calls = assignorCalls;
        RecordingAssignors.clock = coordinator.clock;
        MetadataDelta delta = cluster.newDelta();
        for (JsonNode b : scenario.path("brokers")) cluster.registerBroker(delta, b.get("id").asInt(), Clients.textOrNull(b, "rack"));
        for (JsonNode t : scenario.path("topics")) createTopic(delta, t);
        Compat.onLoaded(coordinator.shard, cluster.apply(delta));
        scenario.path("group_configs").fields().forEachRemaining(e -> coordinator.updateGroupConfig(e.getKey(), configs(e.getValue())));
        List<JsonNode> steps = new ArrayList<>();
        scenario.path("steps").forEach(steps::add);
        steps.sort((a, b) -> Long.compare(a.path("at").asLong(), b.path("at").asLong()));
        long last = 0;
        for (JsonNode step : steps) {
            long at = startMs + step.path("at").asLong();
            runUntil(at);
            long before = coordinator.nextOffset;
            try {
                apply(step);
            } catch (RuntimeException e) {
                ObjectNode d = Coordinator.JSON.objectNode();
                d.put("op", step.path("op").asText());
                d.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
                d.put("time_ms", coordinator.clock.milliseconds());
                errors.add(d);
            }
            drain();
            coordinator.event("step", before, (ObjectNode) step.deepCopy());
            last = Math.max(last, at);
        }
        long end = scenario.has("end") ? startMs + scenario.get("end").asLong() : last + 60_000;
        runUntil(end);
        ObjectNode state = coordinator.state();
        ArrayNode topics = state.putArray("topics");
        cluster.timeline.forEach(t -> topics.add(Coordinator.JSON.pojoNode(t)));
        state.put("name", name);
        state.put("records", coordinator.records);
        state.set("events", events);
        state.set("errors", errors);
        if (!assignorCalls.isEmpty()) state.set("assignor_calls", assignorCalls);
        RecordingAssignors.calls = null;
        return state;
    }

    /** Lets time pass until {@code untilMs}: due timers first, then the clients due, in time order. */
    void runUntil(long untilMs) {
        while (true) {
            long next = coordinator.timer.nextDeadline();
            for (Clients.Client c : live) next = Math.min(next, c.nextAt);
            if (next > untilMs) break;
            coordinator.clock.advanceTo(next);
            coordinator.runTimers();
            drain();
            long now = coordinator.clock.milliseconds();
            for (Clients.Client c : new ArrayList<>(live)) {
                if (c.alive && c.nextAt <= now) {
                    c.act();
                    drain();
                }
            }
            live.removeIf(c -> !c.alive);
        }
        coordinator.clock.advanceTo(untilMs);
    }

    /** Background tasks and the responses that completed meanwhile, until nothing is left. */
    void drain() {
        boolean progress = true;
        while (progress) {
            progress = coordinator.runExecutor();
            while (!inbox.isEmpty()) {
                inbox.poll().run();
                progress = true;
            }
            if (coordinator.timer.nextDeadline() <= coordinator.clock.milliseconds()) progress |= coordinator.runTimers();
        }
    }

    private static Map<String, String> configs(JsonNode node) {
        Map<String, String> out = new TreeMap<>();
        node.fields().forEachRemaining(e -> out.put(e.getKey(), e.getValue().asText()));
        return out;
    }

    private Clients.Client client(JsonNode step) {
        String key = step.get("group").asText() + "\u0000" + step.path("member").asText("m");
        Clients.Client c = clients.get(key);
        if (c == null) throw new IllegalArgumentException("no client " + step.path("member").asText() + " in group "
            + step.get("group").asText());
        return c;
    }

    private void addClient(Clients.Client c) {
        Clients.Client previous = clients.put(c.group + "\u0000" + c.name, c);
        if (previous != null && previous.alive) previous.stop();
        live.add(c);
    }

    void apply(JsonNode step) {
        String op = step.get("op").asText();
        switch (op) {
            case "consumer.join": addClient(new Clients.Consumer(this, step)); break;
            case "share.join": addClient(new Clients.Share(this, step)); break;
            case "classic.join": addClient(new Clients.Classic(this, step)); break;
            case "streams.join": addClient(Streams.client(this, step)); break;
            case "consumer.subscribe": case "share.subscribe": case "classic.subscribe": client(step).subscribe(step); break;
            case "consumer.leave": case "share.leave": case "classic.leave": case "streams.leave": {
                Clients.Client c = client(step);
                if (c.alive) c.leave(step);
                break;
            }
            case "consumer.stop": case "share.stop": case "classic.stop": case "streams.stop": client(step).stop(); break;
            case "consumer.commit": case "classic.commit": memberCommit(client(step), step); break;
            case "commit": simpleCommit(step); break;
            case "txn.commit": txnCommit(step); break;
            case "txn.end": endTxn(step); break;
            case "offsets.delete": deleteOffsets(step); break;
            case "group.delete": deleteGroups(step); break;
            case "group.config": coordinator.updateGroupConfig(step.get("group").asText(), configs(step.get("configs"))); break;
            case "topic.create": {
                MetadataDelta delta = cluster.newDelta();
                createTopic(delta, step);
                Compat.onMetadataUpdate(coordinator.shard, delta, cluster.apply(delta));
                break;
            }
            case "topic.grow": growTopic(step.get("name").asText(), step.get("partitions").asInt()); break;
            case "topic.delete": deleteTopic(step.get("name").asText()); break;
            case "broker.register": {
                MetadataDelta delta = cluster.newDelta();
                cluster.registerBroker(delta, step.get("id").asInt(), Clients.textOrNull(step, "rack"));
                Compat.onMetadataUpdate(coordinator.shard, delta, cluster.apply(delta));
                break;
            }
            case "noop": break;
            default: throw new IllegalArgumentException("unknown op " + op);
        }
    }

    // -- topics ----------------------------------------------------------------------------------------------------

    void createTopic(MetadataDelta delta, JsonNode t) {
        String topicName = t.get("name").asText();
        Uuid id = t.has("id") ? Uuid.fromString(t.get("id").asText()) : new Uuid(random.nextLong(), random.nextLong());
        List<List<Integer>> replicas = null;
        if (t.has("replicas")) {
            replicas = new ArrayList<>();
            for (JsonNode r : t.get("replicas")) {
                List<Integer> rr = new ArrayList<>();
                for (JsonNode b : r) rr.add(b.asInt());
                replicas.add(rr);
            }
        }
        cluster.createTopic(delta, topicName, id, t.get("partitions").asInt(), replicas);
        cluster.timeline.add(cluster.describe(cluster.topics.get(topicName), coordinator.clock.milliseconds()));
    }

    void createTopic(String topicName, int partitions) {
        if (cluster.topics.containsKey(topicName)) return;
        MetadataDelta delta = cluster.newDelta();
        Uuid id = new Uuid(random.nextLong(), random.nextLong());
        cluster.createTopic(delta, topicName, id, partitions, null);
        cluster.timeline.add(cluster.describe(cluster.topics.get(topicName), coordinator.clock.milliseconds()));
        Compat.onMetadataUpdate(coordinator.shard, delta, cluster.apply(delta));
    }

    private void growTopic(String topicName, int partitions) {
        Cluster.Topic topic = cluster.topics.get(topicName);
        if (topic == null || partitions <= topic.partitions) return;
        MetadataDelta delta = cluster.newDelta();
        cluster.addPartitions(delta, topic, partitions, null);
        cluster.timeline.add(cluster.describe(topic, coordinator.clock.milliseconds()));
        Compat.onMetadataUpdate(coordinator.shard, delta, cluster.apply(delta));
    }

    private void deleteTopic(String topicName) {
        Cluster.Topic topic = cluster.topics.get(topicName);
        if (topic == null) return;
        MetadataDelta delta = cluster.newDelta();
        cluster.deleteTopic(delta, topic);
        Compat.onMetadataUpdate(coordinator.shard, delta, cluster.apply(delta));
        Map<Uuid, String> names = new LinkedHashMap<>();
        names.put(topic.id, topic.name);
        Map<Uuid, Integer> counts = new LinkedHashMap<>();
        counts.put(topic.id, topic.partitions);
        long before = coordinator.nextOffset;
        coordinator.write(() -> Compat.onTopicsDeleted(coordinator.shard, names, counts));
        coordinator.event("topic-deleted", before, Coordinator.detail("topic", topicName));
    }

    // -- offsets ---------------------------------------------------------------------------------------------------

    private long nextOffsetFor(String group, String topic, int partition) {
        String key = group + "\u0000" + topic + "\u0000" + partition;
        long next = nextCommittedOffset.getOrDefault(key, 0L) + 1 + random.nextInt(1000);
        nextCommittedOffset.put(key, next);
        return next;
    }

    /** The offsets a step commits: its explicit list, or every partition the client owns at advancing offsets. */
    private Map<String, Map<Integer, long[]>> offsetsOf(String group, JsonNode step, Map<String, Set<Integer>> owned) {
        Map<String, Map<Integer, long[]>> out = new TreeMap<>();
        if (step.has("offsets")) {
            for (JsonNode o : step.get("offsets")) {
                String topic = o.get("topic").asText();
                int p = o.get("partition").asInt();
                long offset = o.has("offset") ? o.get("offset").asLong() : nextOffsetFor(group, topic, p);
                out.computeIfAbsent(topic, k -> new TreeMap<>()).put(p, new long[]{offset, o.path("leader_epoch").asLong(-1)});
            }
        } else if (owned != null) {
            owned.forEach((topic, ps) -> ps.forEach(p ->
                out.computeIfAbsent(topic, k -> new TreeMap<>()).put(p, new long[]{nextOffsetFor(group, topic, p), -1})));
        }
        return out;
    }

    private OffsetCommitRequestData commitRequest(String group, String memberId, int epoch, String instanceId,
                                                  Map<String, Map<Integer, long[]>> offsets, String metadata) {
        List<OffsetCommitRequestData.OffsetCommitRequestTopic> topics = new ArrayList<>();
        offsets.forEach((topic, ps) -> {
            OffsetCommitRequestData.OffsetCommitRequestTopic t = new OffsetCommitRequestData.OffsetCommitRequestTopic().setName(topic);
            Cluster.Topic known = cluster.topics.get(topic);
            Compat.setCommitTopicId(t, known == null ? Uuid.ZERO_UUID : known.id);
            ps.forEach((p, o) -> t.partitions().add(new OffsetCommitRequestData.OffsetCommitRequestPartition()
                .setPartitionIndex(p).setCommittedOffset(o[0]).setCommittedLeaderEpoch((int) o[1]).setCommittedMetadata(metadata)));
            topics.add(t);
        });
        return new OffsetCommitRequestData().setGroupId(group).setMemberId(memberId).setGenerationIdOrMemberEpoch(epoch)
            .setGroupInstanceId(instanceId).setTopics(topics);
    }

    private void commit(String group, String clientId, OffsetCommitRequestData request) {
        long before = coordinator.nextOffset;
        short code = 0;
        try {
            OffsetCommitResponseData response = coordinator.write(() -> coordinator.shard.commitOffset(
                Coordinator.context(ApiKeys.OFFSET_COMMIT, Compat.OFFSET_COMMIT_VERSION, clientId, "localhost"), request));
            for (OffsetCommitResponseData.OffsetCommitResponseTopic t : response.topics())
                for (OffsetCommitResponseData.OffsetCommitResponsePartition p : t.partitions())
                    if (p.errorCode() != 0) code = p.errorCode();
        } catch (RuntimeException e) {
            code = Coordinator.errorOf(e).code();
        }
        ObjectNode d = Coordinator.detail("group", group);
        d.put("error", code);
        coordinator.event("commit", before, d);
    }

    private void memberCommit(Clients.Client c, JsonNode step) {
        if (!c.alive) return;
        Map<String, Map<Integer, long[]>> offsets = offsetsOf(c.group, step, c.ownedByName());
        if (offsets.isEmpty()) return;
        commit(c.group, c.clientId, commitRequest(c.group, c.memberIdForCommit(), c.epochForCommit(), c.instanceIdForCommit(),
            offsets, step.path("metadata").asText("")));
    }

    private void simpleCommit(JsonNode step) {
        String group = step.get("group").asText();
        Map<String, Map<Integer, long[]>> offsets = offsetsOf(group, step, null);
        commit(group, step.path("client_id").asText("admin"), commitRequest(group, "", -1, null, offsets,
            step.path("metadata").asText("")));
    }

    private void txnCommit(JsonNode step) {
        String group = step.get("group").asText();
        long producerId = step.get("producer_id").asLong();
        short producerEpoch = (short) step.path("producer_epoch").asInt(0);
        Map<String, Map<Integer, long[]>> offsets = offsetsOf(group, step, null);
        String memberId = "";
        int generation = -1;
        String instance = null;
        if (step.has("member")) {
            Clients.Client c = client(step);
            memberId = c.memberIdForCommit();
            generation = c.epochForCommit();
            instance = c.instanceIdForCommit();
            if (!step.has("offsets")) offsets = offsetsOf(group, step, c.ownedByName());
        }
        List<TxnOffsetCommitRequestData.TxnOffsetCommitRequestTopic> topics = new ArrayList<>();
        offsets.forEach((topic, ps) -> {
            TxnOffsetCommitRequestData.TxnOffsetCommitRequestTopic t = new TxnOffsetCommitRequestData.TxnOffsetCommitRequestTopic().setName(topic);
            ps.forEach((p, o) -> t.partitions().add(new TxnOffsetCommitRequestData.TxnOffsetCommitRequestPartition()
                .setPartitionIndex(p).setCommittedOffset(o[0]).setCommittedLeaderEpoch((int) o[1])
                .setCommittedMetadata(step.path("metadata").asText(""))));
            topics.add(t);
        });
        TxnOffsetCommitRequestData request = new TxnOffsetCommitRequestData().setTransactionalId(step.path("transactional_id").asText("txn"))
            .setGroupId(group).setProducerId(producerId).setProducerEpoch(producerEpoch).setMemberId(memberId)
            .setGroupInstanceId(instance).setTopics(topics);
        Compat.setTxnGeneration(request, generation);
        long before = coordinator.nextOffset;
        short code = 0;
        try {
            TxnOffsetCommitResponseData response = coordinator.write(() -> coordinator.shard.commitTransactionalOffset(
                Coordinator.context(ApiKeys.TXN_OFFSET_COMMIT, step.path("client_id").asText("producer"), "localhost"), request),
                producerId, producerEpoch);
            for (TxnOffsetCommitResponseData.TxnOffsetCommitResponseTopic t : response.topics())
                for (TxnOffsetCommitResponseData.TxnOffsetCommitResponsePartition p : t.partitions())
                    if (p.errorCode() != 0) code = p.errorCode();
        } catch (RuntimeException e) {
            code = Coordinator.errorOf(e).code();
        }
        ObjectNode d = Coordinator.detail("group", group);
        d.put("producer_id", producerId);
        d.put("error", code);
        coordinator.event("txn-commit", before, d);
    }

    private void endTxn(JsonNode step) {
        long before = coordinator.nextOffset;
        boolean commit = step.path("result").asText("COMMIT").equalsIgnoreCase("COMMIT");
        coordinator.endTransaction(step.get("producer_id").asLong(), (short) step.path("producer_epoch").asInt(0), commit,
            step.path("coordinator_epoch").asInt(0));
        ObjectNode d = Coordinator.JSON.objectNode();
        d.put("producer_id", step.get("producer_id").asLong());
        d.put("result", commit ? "COMMIT" : "ABORT");
        coordinator.event("txn-end", before, d);
    }

    private void deleteOffsets(JsonNode step) {
        String group = step.get("group").asText();
        OffsetDeleteRequestData.OffsetDeleteRequestTopicCollection topics = new OffsetDeleteRequestData.OffsetDeleteRequestTopicCollection();
        step.get("topics").fields().forEachRemaining(e -> {
            OffsetDeleteRequestData.OffsetDeleteRequestTopic t = new OffsetDeleteRequestData.OffsetDeleteRequestTopic().setName(e.getKey());
            for (JsonNode p : e.getValue()) t.partitions().add(new OffsetDeleteRequestData.OffsetDeleteRequestPartition().setPartitionIndex(p.asInt()));
            topics.add(t);
        });
        OffsetDeleteRequestData request = new OffsetDeleteRequestData().setGroupId(group).setTopics(topics);
        long before = coordinator.nextOffset;
        short code = 0;
        try {
            OffsetDeleteResponseData response = coordinator.write(() -> coordinator.shard.deleteOffsets(
                Coordinator.context(ApiKeys.OFFSET_DELETE, "admin", "localhost"), request));
            code = response.errorCode();
        } catch (RuntimeException e) {
            code = Coordinator.errorOf(e).code();
        }
        ObjectNode d = Coordinator.detail("group", group);
        d.put("error", code);
        coordinator.event("offsets-delete", before, d);
    }

    private void deleteGroups(JsonNode step) {
        List<String> groups = Clients.strings(step.get("groups"));
        long before = coordinator.nextOffset;
        ObjectNode d = Coordinator.JSON.objectNode();
        try {
            DeleteGroupsResponseData.DeletableGroupResultCollection results = coordinator.write(() -> coordinator.shard.deleteGroups(
                Coordinator.context(ApiKeys.DELETE_GROUPS, "admin", "localhost"), groups));
            Iterator<DeleteGroupsResponseData.DeletableGroupResult> it = results.iterator();
            while (it.hasNext()) {
                DeleteGroupsResponseData.DeletableGroupResult r = it.next();
                d.put(r.groupId(), r.errorCode());
            }
        } catch (RuntimeException e) {
            d.put("error", Coordinator.errorOf(e).code());
        }
        coordinator.event("group-delete", before, d);
    }

    // -- share groups: what GroupCoordinatorService does after a heartbeat asks for share state ---------------------

    void initialiseShareState(String group, Map<Uuid, Set<Integer>> partitions) {
        long before = coordinator.nextOffset;
        try {
            coordinator.write(() -> Compat.initializeShareGroupState(coordinator.shard, group, partitions));
        } catch (RuntimeException e) {
            ObjectNode d = Coordinator.detail("group", group);
            d.put("error", e.getClass().getSimpleName());
            errors.add(d);
        }
        coordinator.event("share-state-initialised", before, Coordinator.detail("group", group));
    }

    Map<String, Object> streamsState() {
        return streamsState;
    }

    static Set<Integer> range(int n) {
        Set<Integer> out = new TreeSet<>();
        for (int i = 0; i < n; i++) out.add(i);
        return out;
    }
}
