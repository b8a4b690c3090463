package offsetsaudit.oracle;

import java.util.HashMap;
import java.util.Map;

/** The broker configuration a history runs with unless its scenario overrides a key: Kafka's defaults, all protocols on. */
final class Defaults {
    private Defaults() { }

    static Map<String, Object> brokerProps() {
        Map<String, Object> props = new HashMap<>();
        props.put("group.coordinator.rebalance.protocols", Compat.PROTOCOLS);
        props.putAll(Compat.extraBrokerProps());
        return props;
    }
}
