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
 * re-run has to rebuild from the log, straight from the coordinator. A scenario turns it on with the broker config
 * {@code group.consumer.assignors=offsetsaudit.oracle.RecordingAssignors$Uniform,offsetsaudit.oracle.RecordingAssignors$Range}.
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
            for (Uuid t : new TreeSet<>(s.subscribedTopicIds())) {
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
