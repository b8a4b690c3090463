package offsetsaudit.scenarios;

import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;

/** Classic groups (the JoinGroup/SyncGroup protocol), as the Java consumer runs them with group.protocol=classic. */
final class ClassicScenarios {
    private ClassicScenarios() {
    }

    private static final Duration WAIT = Duration.ofSeconds(60);

    /** Eager rebalances (RangeAssignor): members join one by one, one leaves, one crashes and is expired after
     *  its session timeout; the first member is held with every partition. */
    static void eager(Scenarios.Context context) throws Exception {
        int partitions = 4;
        String topic = context.topic("in", partitions);
        context.produce(topic, partitions, 20);
        String group = context.group("group", "consumer");
        Properties props = context.consumer(group, "classic");
        props.put("partition.assignment.strategy", RangeAssignor.class.getName());
        props.put("client.id", context.name("a"));
        Member a = context.hold(Member.subscribed("a", props, List.of(topic)));
        a.awaitAssignment(owned -> owned.size() == partitions, WAIT);
        a.awaitCaughtUp(WAIT);
        a.commit();
        props.put("client.id", context.name("b"));
        Member b = context.hold(Member.subscribed("b", props, List.of(topic)));
        context.awaitStable(group, 2, List.of(a, b), partitions);
        context.produce(topic, partitions, 5);
        a.awaitCaughtUp(WAIT);
        b.awaitCaughtUp(WAIT);
        a.commit();
        b.commit();
        // a third member in a process of its own, killed -9: the group waits for its session to expire
        Process crashed = context.crashableMember(group, "classic", topic);
        context.awaitStable(group, 3, List.of(a, b), partitions - ownedBy(context, group, 3));
        Scenarios.Context.crash(crashed);
        context.awaitStable(group, 2, List.of(a, b), partitions);
        context.release(b);
        context.awaitStable(group, 1, List.of(a), partitions);
        context.produce(topic, partitions, 3);
        a.awaitCaughtUp(WAIT);
        a.commit();
    }

    /** Partitions the members other than the scenario's own threads hold (the crashable member's share),
     *  from the group's description once it has {@code members} members. */
    static int ownedBy(Scenarios.Context context, String group, int members) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            var description = context.admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
            if (description.members().size() == members) {
                int owned = 0;
                for (var member : description.members()) {
                    if (!member.clientId().startsWith(context.prefix)) {
                        owned += member.assignment().topicPartitions().size();
                    }
                }
                @SuppressWarnings("deprecation")
                var state = description.state();
                if (state == org.apache.kafka.common.ConsumerGroupState.STABLE) {
                    return owned;
                }
            }
            Scenarios.sleep(100);
        }
        throw new IllegalStateException(group + " never had " + members + " members");
    }

    /** Incremental cooperative rebalances (CooperativeStickyAssignor): three members join, one leaves; two
     *  are held. */
    static void cooperative(Scenarios.Context context) throws Exception {
        int partitions = 6;
        String topic = context.topic("in", partitions);
        context.produce(topic, partitions, 10);
        String group = context.group("group", "consumer");
        Properties props = context.consumer(group, "classic");
        props.put("partition.assignment.strategy", CooperativeStickyAssignor.class.getName());
        props.put("client.id", context.name("a"));
        Member a = context.hold(Member.subscribed("a", props, List.of(topic)));
        a.awaitAssignment(owned -> owned.size() == partitions, WAIT);
        a.awaitCaughtUp(WAIT);
        a.commit();
        props.put("client.id", context.name("b"));
        Member b = context.hold(Member.subscribed("b", props, List.of(topic)));
        context.awaitStable(group, 2, List.of(a, b), partitions);
        props.put("client.id", context.name("c"));
        Member c = context.hold(Member.subscribed("c", props, List.of(topic)));
        context.awaitStable(group, 3, List.of(a, b, c), partitions);
        context.produce(topic, partitions, 4);
        for (Member member : List.of(a, b, c)) {
            member.awaitCaughtUp(WAIT);
            member.commit();
        }
        context.release(a);
        context.awaitStable(group, 2, List.of(b, c), partitions);
        b.commit();
        c.commit();
    }

    /** Static membership (group.instance.id): two static members; one restarts within its session timeout and
     *  takes its place back without a rebalance of the other. */
    static void staticMembers(Scenarios.Context context) throws Exception {
        int partitions = 4;
        String topic = context.topic("in", partitions);
        context.produce(topic, partitions, 10);
        String group = context.group("group", "consumer");
        Properties props = context.consumer(group, "classic");
        props.put("partition.assignment.strategy", RangeAssignor.class.getName());
        props.put("session.timeout.ms", "10000");
        props.put("client.id", context.name("a"));
        props.put("group.instance.id", context.name("instance-a"));
        Member a = context.hold(Member.subscribed("a", props, List.of(topic)));
        Properties propsB = (Properties) props.clone();
        propsB.put("client.id", context.name("b"));
        propsB.put("group.instance.id", context.name("instance-b"));
        Member b = context.hold(Member.subscribed("b", propsB, List.of(topic)));
        context.awaitStable(group, 2, List.of(a, b), partitions);
        a.awaitCaughtUp(WAIT);
        b.awaitCaughtUp(WAIT);
        a.commit();
        b.commit();
        // a static member's close() sends no LeaveGroup: the restart rejoins under the same instance id
        context.release(b);
        Member restarted = context.hold(Member.subscribed("b2", propsB, List.of(topic)));
        context.awaitStable(group, 2, List.of(a, restarted), partitions);
        restarted.awaitCaughtUp(WAIT);
        restarted.commit();
    }
}
