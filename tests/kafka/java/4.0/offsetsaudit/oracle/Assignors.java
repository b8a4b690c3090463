package offsetsaudit.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.RangeAssignor;
import org.apache.kafka.coordinator.group.assignor.SimpleAssignor;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Kafka's server-side assignors on JSON inputs in the golden assignor layout (tests/golden/README.md, section 4):
 * {@code UniformAssignor} ("uniform"), {@code RangeAssignor} ("range"), the share groups' {@code SimpleAssignor}
 * ("simple") and the streams groups' {@code StickyTaskAssignor} ("sticky"/"streams_sticky"). The inputs are handed
 * over in {@code HashMap}s filled in the input's member order, as the coordinator builds them, so ties break the way
 * they do on a broker. Each output line carries the assignor's result, the member iteration order it saw and the
 * wall time of the {@code assign} call (the fastest of {@code --repeat} calls).
 */
final class Assignors {
    private Assignors() { }

    static void main(String[] args, PrintStream out) throws Exception {
        if (args.length < 2) throw new IllegalArgumentException("assign INPUTS.jsonl [--repeat N]");
        int repeat = 1;
        boolean chain = false;
        for (int i = 2; i < args.length; i++) {
            if (args[i].equals("--repeat") && i + 1 < args.length) repeat = Integer.parseInt(args[i + 1]);
            if (args[i].equals("--chain")) chain = true;
        }
        String previousCase = null;
        for (JsonNode line : Main.readLines(args[1])) {
            String caseId = line.path("case_id").asText("");
            String scenario = caseId.contains("-step") ? caseId.substring(0, caseId.lastIndexOf("-step")) : null;
            // a scenario's next step meets the assignment objects the previous step's assign() returned, as a
            // group's next target assignment does on a broker (their iteration order is part of the history)
            if (!chain || scenario == null || !scenario.equals(previousCase)) carried = null;
            ObjectNode result = run(line, Math.max(1, repeat));
            previousCase = scenario;
            if (line.has("case_id")) result.put("case_id", caseId);
            out.println(Main.MAPPER.writeValueAsString(result));
        }
    }

    /** The previous step's assignment per member, as Kafka's assignor returned it (for {@code --chain}). */
    private static Map<String, Map<Uuid, Set<Integer>>> carried;

    /**
     * A member's current assignment: when it is what the previous step gave the member (topics gone since left
     * out), a default {@code HashMap} filled in the order that output iterates, each topic's partitions a new
     * {@code HashSet} of them, as the coordinator's records rebuild a member's assignment; else the input's.
     */
    private static Map<Uuid, Set<Integer>> current(String memberId, JsonNode node) {
        Map<Uuid, Set<Integer>> given = partitions(node);
        Map<Uuid, Set<Integer>> before = carried == null ? null : carried.get(memberId);
        if (before == null) return given;
        Map<Uuid, Set<Integer>> rebuilt = new HashMap<>();
        before.forEach((topic, ps) -> {
            if (!ps.isEmpty() && given.containsKey(topic)) rebuilt.put(topic, new HashSet<>(ps));
        });
        return rebuilt.equals(given) ? rebuilt : given;
    }

    static ObjectNode run(JsonNode line, int repeat) {
        String name = line.path("assignor").asText();
        JsonNode input = line.has("input") ? line.get("input") : line;
        switch (name) {
            case "uniform": return modern(new UniformAssignor(), input, repeat);
            case "range": return modern(new RangeAssignor(), input, repeat);
            case "simple": return modern(new SimpleAssignor(), input, repeat);
            case "sticky": case "streams_sticky": case "streams-sticky": return StreamsAssign.run(input, repeat);
            default: throw new IllegalArgumentException("unknown assignor " + name);
        }
    }

    /** The topics of an input as a {@code SubscribedTopicDescriber}: partition counts and each partition's racks. */
    static final class Topics implements SubscribedTopicDescriber {
        final Map<Uuid, Integer> partitions = new HashMap<>();
        final Map<Uuid, List<Set<String>>> racks = new HashMap<>();

        Topics(JsonNode topics) {
            for (JsonNode t : topics) {
                Uuid id = Uuid.fromString(t.get("id").asText());
                partitions.put(id, t.get("partitions").asInt());
                JsonNode pr = t.get("partition_racks");
                if (pr != null && !pr.isNull()) {
                    List<Set<String>> list = new ArrayList<>();
                    for (JsonNode p : pr) {
                        Set<String> set = new HashSet<>();
                        if (p != null && !p.isNull()) for (JsonNode r : p) set.add(r.asText());
                        list.add(set);
                    }
                    racks.put(id, list);
                }
            }
        }

        @Override
        public int numPartitions(Uuid topicId) {
            return partitions.getOrDefault(topicId, -1);
        }

        @Override
        public Set<String> racksForPartition(Uuid topicId, int partition) {
            List<Set<String>> list = racks.get(topicId);
            if (list == null || partition >= list.size()) return Collections.emptySet();
            return list.get(partition);
        }
    }

    static Map<Uuid, Set<Integer>> partitions(JsonNode node) {
        Map<Uuid, Set<Integer>> out = new HashMap<>();
        if (node == null || node.isNull()) return out;
        node.fields().forEachRemaining(e -> {
            Set<Integer> set = new HashSet<>();
            for (JsonNode p : e.getValue()) set.add(p.asInt());
            out.put(Uuid.fromString(e.getKey()), set);
        });
        return out;
    }

    static ObjectNode modern(PartitionAssignor assignor, JsonNode input, int repeat) {
        Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
        Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
        // an input rebuilt from a log lists each member's topics in the coordinator's TopicIds order: keep it
        boolean asListed = "topic_ids".equals(input.path("subscribed_topic_order").asText(""));
        for (JsonNode m : input.path("members")) {
            String memberId = m.get("member_id").asText();
            Set<Uuid> subscribed = asListed ? new java.util.LinkedHashSet<>() : new HashSet<>();
            for (JsonNode t : m.path("subscribed_topic_ids")) subscribed.add(Uuid.fromString(t.asText()));
            Map<Uuid, Set<Integer>> current = current(memberId, m.get("current_assignment"));
            current.forEach((topic, ps) -> ps.forEach(p -> inverted.computeIfAbsent(topic, k -> new HashMap<>()).put(p, memberId)));
            members.put(memberId, new MemberSubscriptionAndAssignmentImpl(
                Optional.ofNullable(Clients.textOrNull(m, "rack_id")), Optional.ofNullable(Clients.textOrNull(m, "instance_id")),
                subscribed, new Assignment(current)));
        }
        SubscriptionType type = SubscriptionType.valueOf(input.path("subscription_type").asText("HOMOGENEOUS"));
        JsonNode assignable = input.get("assignable_partitions");
        GroupSpec spec = Compat.groupSpec(members, type, inverted,
            assignable == null || assignable.isNull() ? null : partitions(assignable));
        Topics topics = new Topics(input.path("topics"));
        ObjectNode out = Coordinator.JSON.objectNode();
        ArrayNode order = out.putArray("java_member_iteration_order");
        for (String id : spec.memberIds()) order.add(id);
        Timed<GroupAssignment> timed;
        try {
            timed = Timed.best(repeat, () -> assignor.assign(spec, topics));
        } catch (RuntimeException e) {
            carried = null;
            out.put("error", e.getClass().getSimpleName());
            out.put("message", e.getMessage());
            return out;
        }
        out.putNull("error");
        GroupAssignment assignment = timed.result;
        carried = new HashMap<>();
        for (Map.Entry<String, MemberAssignment> e : assignment.members().entrySet()) {
            carried.put(e.getKey(), e.getValue().partitions());
        }
        ObjectNode byMember = out.putObject("members");
        for (Map.Entry<String, MemberAssignment> e : new TreeMap<>(assignment.members()).entrySet()) {
            ObjectNode m = byMember.putObject(e.getKey());
            Map<String, Set<Integer>> sorted = new TreeMap<>();
            e.getValue().partitions().forEach((topic, ps) -> {
                sorted.put(topic.toString(), new TreeSet<>(ps));
            });
            sorted.forEach((topic, ps) -> {
                ArrayNode a = m.putArray(topic);
                ps.forEach(a::add);
            });
        }
        out.put("java_nanos", timed.nanos);
        out.put("java_thread_cpu_nanos", timed.cpuNanos);
        return out;
    }

    /**
     * An assignor call's result with the best wall time and the best calling-thread CPU time of {@code repeat} calls
     * (the CPU time is steadier on a busy host). A call's RuntimeException, the assignor's own error, propagates.
     */
    static final class Timed<T> {
        final T result;
        final long nanos;
        final long cpuNanos;

        private Timed(T result, long nanos, long cpuNanos) {
            this.result = result;
            this.nanos = nanos;
            this.cpuNanos = cpuNanos;
        }

        static <T> Timed<T> best(int repeat, java.util.function.Supplier<T> call) {
            java.lang.management.ThreadMXBean threads = java.lang.management.ManagementFactory.getThreadMXBean();
            long best = Long.MAX_VALUE;
            long bestCpu = Long.MAX_VALUE;
            T result = null;
            for (int i = 0; i < repeat; i++) {
                long started = System.nanoTime();
                long startedCpu = threads.getCurrentThreadCpuTime();
                result = call.get();
                best = Math.min(best, System.nanoTime() - started);
                bestCpu = Math.min(bestCpu, threads.getCurrentThreadCpuTime() - startedCpu);
            }
            return new Timed<>(result, best, bestCpu);
        }
    }

    static Map<String, Set<Integer>> tasks(JsonNode node) {
        Map<String, Set<Integer>> out = new LinkedHashMap<>();
        if (node == null || node.isNull()) return out;
        node.fields().forEachRemaining(e -> {
            Set<Integer> set = new HashSet<>();
            for (JsonNode p : e.getValue()) set.add(p.asInt());
            out.put(e.getKey(), set);
        });
        return out;
    }

    static ObjectNode tasksJson(Map<String, Set<Integer>> tasks) {
        ObjectNode out = Coordinator.JSON.objectNode();
        new TreeMap<>(tasks).forEach((s, ps) -> {
            if (ps.isEmpty()) return;
            ArrayNode a = out.putArray(s);
            new TreeSet<>(ps).forEach(a::add);
        });
        return out;
    }
}
