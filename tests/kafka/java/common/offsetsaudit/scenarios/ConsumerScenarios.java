package offsetsaudit.scenarios;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.NewPartitions;

/** KIP-848 consumer groups (group.protocol=consumer): the broker computes the assignment with its own assignor. */
final class ConsumerScenarios {
    private ConsumerScenarios() {
    }

    private static final Duration WAIT = Duration.ofSeconds(60);

    static Properties props(Scenarios.Context context, String group, String assignor, String client) {
        Properties props = context.consumer(group, "consumer");
        props.put("group.remote.assignor", assignor);
        props.put("client.id", context.name(client));
        return props;
    }

    /** The uniform assignor over members with different subscriptions (its heterogeneous builder, which Kafka 4.0
     *  replaced): one member reads a topic alone, a second also reads another topic, a third joins for the second
     *  topic only, then leaves; two are held. */
    static void mixed(Scenarios.Context context) throws Exception {
        String first = context.topic("in", 4);
        String second = context.topic("more", 3);
        context.produce(first, 4, 5);
        context.produce(second, 3, 5);
        String group = context.group("group", "consumer");
        Member a = context.hold(Member.subscribed("a", props(context, group, "uniform", "a"), List.of(first)));
        a.awaitAssignment(owned -> owned.size() == 4, WAIT);
        Member b = context.hold(Member.subscribed("b", props(context, group, "uniform", "b"),
            List.of(first, second)));
        context.awaitStable(group, 2, List.of(a, b), 7);
        Member c = context.hold(Member.subscribed("c", props(context, group, "uniform", "c"), List.of(second)));
        context.awaitStable(group, 3, List.of(a, b, c), 7);
        for (Member member : List.of(a, b, c)) {
            member.awaitCaughtUp(WAIT);
            member.commit();
        }
        context.release(c);
        context.awaitStable(group, 2, List.of(a, b), 7);
        a.commit();
        b.commit();
    }

    /** The uniform assignor: members join one by one, one leaves, one crashes and is fenced after its session
     *  timeout; two are held. */
    static void uniform(Scenarios.Context context) throws Exception {
        int partitions = 6;
        String topic = context.topic("in", partitions);
        context.produce(topic, partitions, 10);
        String group = context.group("group", "consumer");
        Member a = context.hold(Member.subscribed("a", props(context, group, "uniform", "a"), List.of(topic)));
        a.awaitAssignment(owned -> owned.size() == partitions, WAIT);
        a.awaitCaughtUp(WAIT);
        a.commit();
        Member b = context.hold(Member.subscribed("b", props(context, group, "uniform", "b"), List.of(topic)));
        context.awaitStable(group, 2, List.of(a, b), partitions);
        Member c = context.hold(Member.subscribed("c", props(context, group, "uniform", "c"), List.of(topic)));
        context.awaitStable(group, 3, List.of(a, b, c), partitions);
        context.produce(topic, partitions, 3);
        for (Member member : List.of(a, b, c)) {
            member.awaitCaughtUp(WAIT);
            member.commit();
        }
        context.release(c);
        context.awaitStable(group, 2, List.of(a, b), partitions);
        Process crashed = context.crashableMember(group, "consumer", topic);
        context.awaitStable(group, 3, List.of(a, b), partitions - ClassicScenarios.ownedBy(context, group, 3));
        Scenarios.Context.crash(crashed);
        context.awaitStable(group, 2, List.of(a, b), partitions);
        a.commit();
        b.commit();
    }

    /** The range assignor over two topics: a subscription change (a member adds the second topic, then all
     *  do) and partitions added to a subscribed topic; two members are held. */
    static void range(Scenarios.Context context) throws Exception {
        String first = context.topic("first", 3);
        String second = context.topic("second", 2);
        context.produce(first, 3, 5);
        context.produce(second, 2, 5);
        String group = context.group("group", "consumer");
        Member a = context.hold(Member.subscribed("a", props(context, group, "range", "a"), List.of(first)));
        Member b = context.hold(Member.subscribed("b", props(context, group, "range", "b"), List.of(first)));
        context.awaitStable(group, 2, List.of(a, b), 3);
        a.awaitCaughtUp(WAIT);
        b.awaitCaughtUp(WAIT);
        a.commit();
        b.commit();
        a.resubscribe(List.of(first, second));
        context.awaitStable(group, 2, List.of(a, b), 5);
        b.resubscribe(List.of(first, second));
        context.awaitStable(group, 2, List.of(a, b), 5);
        a.awaitCaughtUp(WAIT);
        b.awaitCaughtUp(WAIT);
        a.commit();
        b.commit();
        context.admin.createPartitions(Map.of(first, NewPartitions.increaseTo(5))).all().get();
        context.produce(first, 5, 2);
        context.awaitStable(group, 2, List.of(a, b), 7);
        a.awaitCaughtUp(WAIT);
        b.awaitCaughtUp(WAIT);
        a.commit();
        b.commit();
    }

    /** A static member (group.instance.id) restarted: its close() leaves temporarily (member epoch -2) and the
     *  new consumer with the same instance id gets the same partitions back. */
    static void staticMember(Scenarios.Context context) throws Exception {
        int partitions = 4;
        String topic = context.topic("in", partitions);
        context.produce(topic, partitions, 8);
        String group = context.group("group", "consumer");
        Properties propsA = props(context, group, "uniform", "a");
        propsA.put("group.instance.id", context.name("instance-a"));
        Properties propsB = props(context, group, "uniform", "b");
        propsB.put("group.instance.id", context.name("instance-b"));
        Member a = context.hold(Member.subscribed("a", propsA, List.of(topic)));
        Member b = context.hold(Member.subscribed("b", propsB, List.of(topic)));
        context.awaitStable(group, 2, List.of(a, b), partitions);
        a.awaitCaughtUp(WAIT);
        b.awaitCaughtUp(WAIT);
        a.commit();
        b.commit();
        context.release(b);
        Member restarted = context.hold(Member.subscribed("b2", propsB, List.of(topic)));
        context.awaitStable(group, 2, List.of(a, restarted), partitions);
        context.produce(topic, partitions, 2);
        a.awaitCaughtUp(WAIT);
        restarted.awaitCaughtUp(WAIT);
        a.commit();
        restarted.commit();
    }
}
