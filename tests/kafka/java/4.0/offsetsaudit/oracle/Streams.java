package offsetsaudit.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;

import org.apache.kafka.coordinator.group.GroupCoordinatorShard;

import java.util.List;

/** Streams groups (KIP-1071) before Kafka 4.2's shard exposed them: a history that asks for one fails naming why. */
final class Streams {
    private Streams() { }

    static Clients.Client client(Driver driver, JsonNode step) {
        throw new UnsupportedOperationException("streams groups need Kafka 4.2 or later in the oracle");
    }

    static ArrayNode describe(GroupCoordinatorShard shard, List<String> groups, long offset) {
        return Coordinator.JSON.arrayNode();
    }
}
