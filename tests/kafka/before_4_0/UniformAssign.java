import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignorException;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;
import org.apache.kafka.coordinator.group.modern.SubscribedTopicDescriberImpl;
import org.apache.kafka.coordinator.group.modern.TopicMetadata;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * Kafka 3.x's own UniformAssignor on cases in the project's golden input layout, one JSON object a line on stdin
 * ({"case_id", "input"}), one answer a line on stdout ({"case_id", "error", "message", "members"}). Kafka 4.0
 * changed the assignor API this program calls, so it runs on 3.x jars only, as a single-file program
 * (java -cp LIBS UniformAssign.java); it exists so the tests can judge the project's model of 3.x's builders
 * against 3.x itself. The members go into a HashMap in the input's order, as the coordinator fills its own.
 */
public class UniformAssign {
    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            JsonNode request = mapper.readTree(line);
            JsonNode input = request.get("input");
            ObjectNode answer = mapper.createObjectNode();
            answer.set("case_id", request.get("case_id"));
            Map<Uuid, TopicMetadata> topics = new HashMap<>();
            for (JsonNode topic : input.get("topics")) {
                Uuid id = Uuid.fromString(topic.get("id").asText());
                topics.put(id, new TopicMetadata(id, topic.get("name").asText(), topic.get("partitions").asInt(),
                    Collections.emptyMap()));
            }
            Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
            Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
            for (JsonNode member : input.get("members")) {
                String memberId = member.get("member_id").asText();
                Set<Uuid> subscribed = new HashSet<>();
                for (JsonNode id : member.get("subscribed_topic_ids")) subscribed.add(Uuid.fromString(id.asText()));
                Map<Uuid, Set<Integer>> current = new HashMap<>();
                JsonNode owned = member.get("current_assignment");
                if (owned != null && !owned.isNull()) {
                    owned.fields().forEachRemaining(entry -> {
                        Uuid topicId = Uuid.fromString(entry.getKey());
                        List<Integer> partitions = new ArrayList<>();
                        for (JsonNode p : entry.getValue()) {
                            partitions.add(p.asInt());
                            inverted.computeIfAbsent(topicId, k -> new HashMap<>()).put(p.asInt(), memberId);
                        }
                        // As Assignment.fromRecord rebuilds a member's target from the log.
                        current.put(topicId, new HashSet<>(partitions));
                    });
                }
                members.put(memberId, new MemberSubscriptionAndAssignmentImpl(Optional.empty(), Optional.empty(),
                    subscribed, new Assignment(current)));
            }
            SubscriptionType type = SubscriptionType.valueOf(input.get("subscription_type").asText());
            try {
                GroupAssignment result = new UniformAssignor().assign(new GroupSpecImpl(members, type, inverted),
                    new SubscribedTopicDescriberImpl(topics));
                ObjectNode out = answer.putObject("members");
                for (Map.Entry<String, MemberAssignment> entry : result.members().entrySet()) {
                    ObjectNode member = out.putObject(entry.getKey());
                    entry.getValue().partitions().forEach((topicId, partitions) -> {
                        if (!partitions.isEmpty()) {
                            var list = member.putArray(topicId.toString());
                            new TreeSet<>(partitions).forEach(list::add);
                        }
                    });
                }
                answer.putNull("error");
            } catch (PartitionAssignorException e) {
                answer.put("error", "PartitionAssignorException");
                answer.put("message", e.getMessage());
            }
            System.out.println(mapper.writeValueAsString(answer));
        }
    }
}
