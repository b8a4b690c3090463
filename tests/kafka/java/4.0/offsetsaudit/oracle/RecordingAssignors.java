package offsetsaudit.oracle;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignorException;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.assignor.RangeAssignor;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;

import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Kafka's consumer-group assignors, wrapped so a history records every input the coordinator handed them (in the
 * golden assignor layout, members in the {@code GroupSpec}'s iteration order) with the result: what an assignor
 * re-run has to rebuild from the log, straight from the coordinator. A scenario with {@code "record_assignor_inputs":
 * true} runs with its {@code group.consumer.assignors} and {@code group.share.assignors} replaced by these wrappers,
 * name for name, so the history is the same one.
 */
public final class RecordingAssignors {
    private RecordingAssignors() { }

    /** The calls of the history being played (the driver sets and reads it; one history at a time per JVM). */
    static ArrayNode calls;
    static ManualClock clock;

    static void record(String name, GroupSpec spec, SubscribedTopicDescriber topics, GroupAssignment result) {
        if (calls == null) return;
        ObjectNode call = calls.addObject();
        call.put("assignor", name);
        call.put("time_ms", clock == null ? -1 : clock.milliseconds());
        ObjectNode input = call.putObject("input");
        input.put("subscription_type", spec.subscriptionType().name());
        Set<Uuid> all = new java.util.LinkedHashSet<>();
        ArrayNode members = input.putArray("members");
        for (String id : spec.memberIds()) {
            MemberSubscription s = spec.memberSubscription(id);
            ObjectNode m = members.addObject();
            m.put("member_id", id);
            m.put("instance_id", s.instanceId().orElse(null));
            m.put("rack_id", s.rackId().orElse(null));
            ArrayNode ids = m.putArray("subscribed_topic_ids");
            for (Uuid t : s.subscribedTopicIds()) {
                ids.add(t.toString());
                all.add(t);
            }
            m.set("current_assignment", partitions(spec.memberAssignment(id).partitions()));
        }
        ArrayNode t = input.putArray("topics");
        for (Uuid id : all) {
            ObjectNode topic = t.addObject();
            topic.put("id", id.toString());
            int n = topics.numPartitions(id);
            topic.put("partitions", n);
            ArrayNode racks = topic.putArray("partition_racks");
            for (int p = 0; p < Math.max(0, n); p++) {
                ArrayNode r = racks.addArray();
                new TreeSet<>(topics.racksForPartition(id, p)).forEach(r::add);
            }
        }
        // the share groups' assignable partitions (GroupSpec.isPartitionAssignable, Kafka 4.2 on)
        if (Reflect.method(spec.getClass(), "isPartitionAssignable", 2) != null) {
            ObjectNode assignable = input.putObject("assignable_partitions");
            for (Uuid id : all) {
                ArrayNode ps = assignable.putArray(id.toString());
                for (int p = 0; p < Math.max(0, topics.numPartitions(id)); p++)
                    if (Boolean.TRUE.equals(Reflect.call(spec, "isPartitionAssignable", id, p))) ps.add(p);
            }
        }
        ObjectNode out = call.putObject("result");
        result.members().forEach((member, a) -> out.set(member, partitions(a.partitions())));
    }

    static ObjectNode partitions(Map<Uuid, Set<Integer>> byTopic) {
        ObjectNode out = Coordinator.JSON.objectNode();
        Map<String, Set<Integer>> sorted = new TreeMap<>();
        byTopic.forEach((topic, ps) -> sorted.put(topic.toString(), new TreeSet<>(ps)));
        sorted.forEach((topic, ps) -> {
            ArrayNode a = out.putArray(topic);
            ps.forEach(a::add);
        });
        return out;
    }

    /** The broker configs with each built-in consumer and share assignor replaced by its recording wrapper. */
    static void wrap(Map<String, Object> props) {
        Object consumer = props.getOrDefault("group.consumer.assignors", "uniform,range");
        StringBuilder out = new StringBuilder();
        for (String name : String.valueOf(consumer).replace("[", "").replace("]", "").split(",")) {
            String n = name.trim();
            if (n.isEmpty()) continue;
            if (out.length() > 0) out.append(',');
            if (n.equals("uniform") || n.endsWith(".UniformAssignor")) out.append(Uniform.class.getName());
            else if (n.equals("range") || n.endsWith(".RangeAssignor")) out.append(Range.class.getName());
            else out.append(n);
        }
        props.put("group.consumer.assignors", out.toString());
        Object share = props.getOrDefault("group.share.assignors", "simple");
        if (String.valueOf(share).trim().equals("simple") || String.valueOf(share).endsWith(".SimpleAssignor"))
            props.put("group.share.assignors", Simple.class.getName());
    }

    public static final class Simple implements org.apache.kafka.coordinator.group.api.assignor.ShareGroupPartitionAssignor {
        private final org.apache.kafka.coordinator.group.assignor.SimpleAssignor delegate =
            new org.apache.kafka.coordinator.group.assignor.SimpleAssignor();

        @Override
        public String name() {
            return delegate.name();
        }

        @Override
        public GroupAssignment assign(GroupSpec spec, SubscribedTopicDescriber topics) throws PartitionAssignorException {
            GroupAssignment result = delegate.assign(spec, topics);
            record(name(), spec, topics, result);
            return result;
        }
    }

    public static final class Uniform implements ConsumerGroupPartitionAssignor {
        private final UniformAssignor delegate = new UniformAssignor();

        @Override
        public String name() {
            return delegate.name();
        }

        @Override
        public GroupAssignment assign(GroupSpec spec, SubscribedTopicDescriber topics) throws PartitionAssignorException {
            GroupAssignment result = delegate.assign(spec, topics);
            record(name(), spec, topics, result);
            return result;
        }
    }

    public static final class Range implements ConsumerGroupPartitionAssignor {
        private final RangeAssignor delegate = new RangeAssignor();

        @Override
        public String name() {
            return delegate.name();
        }

        @Override
        public GroupAssignment assign(GroupSpec spec, SubscribedTopicDescriber topics) throws PartitionAssignorException {
            GroupAssignment result = delegate.assign(spec, topics);
            record(name(), spec, topics, result);
            return result;
        }
    }
}
