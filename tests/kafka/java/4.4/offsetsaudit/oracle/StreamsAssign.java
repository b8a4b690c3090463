package offsetsaudit.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.coordinator.group.api.streams.assignor.AssignmentConfigs;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.apache.kafka.coordinator.group.streams.assignor.GroupSpecImpl;
import org.apache.kafka.coordinator.group.streams.assignor.MemberMetadataAndStateImpl;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.TreeMap;

/** The streams groups' {@code StickyTaskAssignor} on a golden-layout input (Kafka 4.4's public streams assignor API). */
final class StreamsAssign {
    private StreamsAssign() { }

    static final class Topology implements TopologyDescriber {
        final List<String> ids = new ArrayList<>();
        final Map<String, Integer> partitions = new HashMap<>();
        final Map<String, Boolean> stateful = new HashMap<>();

        Topology(JsonNode subtopologies) {
            for (JsonNode s : subtopologies) {
                String id = s.get("subtopology_id").asText();
                ids.add(id);
                partitions.put(id, s.get("max_num_input_partitions").asInt());
                stateful.put(id, s.path("stateful").asBoolean(false));
            }
        }

        @Override
        public List<String> subtopologies() {
            return ids;
        }

        @Override
        public int maxNumInputPartitions(String subtopologyId) {
            Integer n = partitions.get(subtopologyId);
            if (n == null) throw new NoSuchElementException(subtopologyId);
            return n;
        }

        @Override
        public boolean isStateful(String subtopologyId) {
            return stateful.getOrDefault(subtopologyId, false);
        }
    }

    static Map<String, Map<Integer, Long>> offsets(JsonNode node) {
        Map<String, Map<Integer, Long>> out = new HashMap<>();
        if (node == null || node.isNull()) return out;
        node.fields().forEachRemaining(s -> s.getValue().fields().forEachRemaining(p ->
            out.computeIfAbsent(s.getKey(), k -> new HashMap<>()).put(Integer.parseInt(p.getKey()), p.getValue().asLong())));
        return out;
    }

    static ObjectNode run(JsonNode input, int repeat) {
        Map<String, MemberMetadataAndStateImpl> members = new HashMap<>();
        for (JsonNode m : input.path("members")) {
            Map<String, String> tags = new TreeMap<>();
            m.path("client_tags").fields().forEachRemaining(e -> tags.put(e.getKey(), e.getValue().asText()));
            members.put(m.get("member_id").asText(), new MemberMetadataAndStateImpl(
                Optional.ofNullable(Clients.textOrNull(m, "instance_id")), Optional.ofNullable(Clients.textOrNull(m, "rack_id")),
                m.path("process_id").asText(), tags, Assignors.tasks(m.get("active_tasks")),
                Assignors.tasks(m.get("standby_tasks")), Assignors.tasks(m.get("warmup_tasks")),
                offsets(m.get("task_offsets")), offsets(m.get("task_end_offsets"))));
        }
        JsonNode c = input.path("configs");
        int standby = c.path("num_standby_replicas").asInt(0);
        List<String> tags = new ArrayList<>();
        for (JsonNode t : c.path("rack_aware_assignment_tags")) tags.add(t.asText());
        AssignmentConfigs configs = new AssignmentConfigs() {
            @Override
            public int numStandbyReplicas() {
                return standby;
            }

            @Override
            public List<String> rackAwareAssignmentTags() {
                return tags;
            }
        };
        GroupSpecImpl spec = new GroupSpecImpl(members, configs);
        Topology topology = new Topology(input.path("subtopologies"));
        ObjectNode out = Coordinator.JSON.objectNode();
        ArrayNode order = out.putArray("java_member_iteration_order");
        for (String id : members.keySet()) order.add(id);
        Assignors.Timed<GroupAssignment> timed;
        try {
            timed = Assignors.Timed.best(repeat, () -> new StickyTaskAssignor().assign(spec, topology));
        } catch (RuntimeException e) {
            out.put("error", e.getClass().getSimpleName());
            out.put("message", e.getMessage());
            return out;
        }
        out.putNull("error");
        GroupAssignment assignment = timed.result;
        ObjectNode byMember = out.putObject("members");
        for (Map.Entry<String, MemberAssignment> e : new TreeMap<>(assignment.members()).entrySet()) {
            ObjectNode m = byMember.putObject(e.getKey());
            m.set("active_tasks", Assignors.tasksJson(e.getValue().activeTasks()));
            m.set("standby_tasks", Assignors.tasksJson(e.getValue().standbyTasks()));
        }
        out.put("java_nanos", timed.nanos);
        out.put("java_thread_cpu_nanos", timed.cpuNanos);
        return out;
    }
}
