package offsetsaudit.scenarios;

import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.SubscriptionPattern;

/** A consumer group subscribed by a broker-side regular expression (KIP-848's SubscriptionPattern): two
 *  matching topics at first, a third created while the members are in the group; two members are held. */
public final class RegexScenario implements Scenarios.Scenario {

    @Override
    public void run(Scenarios.Context context) throws Exception {
        String first = context.topic("match-a", 2);
        String second = context.topic("match-b", 1);
        context.topic("other", 2);
        context.produce(first, 2, 4);
        context.produce(second, 1, 4);
        String group = context.group("group", "consumer");
        SubscriptionPattern pattern = new SubscriptionPattern(context.prefix.replace(".", "\\.") + "-match-.*");
        Properties propsA = ConsumerScenarios.props(context, group, "uniform", "a");
        Properties propsB = ConsumerScenarios.props(context, group, "uniform", "b");
        Member a = context.hold(new Member("a", propsA, c -> c.subscribe(pattern)));
        Member b = context.hold(new Member("b", propsB, c -> c.subscribe(pattern)));
        context.awaitStable(group, 2, List.of(a, b), 3);
        a.awaitCaughtUp(Duration.ofSeconds(60));
        b.awaitCaughtUp(Duration.ofSeconds(60));
        a.commit();
        b.commit();
        String third = context.topic("match-c", 2);
        context.produce(third, 2, 3);
        context.awaitStable(group, 2, List.of(a, b), 5);
        a.awaitCaughtUp(Duration.ofSeconds(60));
        b.awaitCaughtUp(Duration.ofSeconds(60));
        a.commit();
        b.commit();
    }
}
