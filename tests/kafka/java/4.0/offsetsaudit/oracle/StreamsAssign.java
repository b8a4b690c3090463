package offsetsaudit.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

/** Kafka 4.0 has no streams task assignor in the group coordinator. */
final class StreamsAssign {
    private StreamsAssign() { }

    static ObjectNode run(JsonNode input, int repeat) {
        throw new UnsupportedOperationException("the streams sticky assignor needs Kafka 4.2 or later in the oracle");
    }
}
