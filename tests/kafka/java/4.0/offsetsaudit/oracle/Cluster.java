package offsetsaudit.oracle;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.PartitionRecord;
import org.apache.kafka.common.metadata.RegisterBrokerRecord;
import org.apache.kafka.common.metadata.RemoveTopicRecord;
import org.apache.kafka.common.metadata.TopicRecord;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.image.MetadataProvenance;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The cluster the coordinator sees: KRaft metadata images built by replaying {@code RegisterBrokerRecord},
 * {@code TopicRecord}, {@code PartitionRecord} and {@code RemoveTopicRecord} into a {@code MetadataDelta}, as the
 * broker's metadata publisher hands them to the group coordinator. Racks come from the brokers holding each
 * partition's replicas, which is what the assignors and the metadata hash read.
 */
final class Cluster {
    static final class Topic {
        final String name;
        final Uuid id;
        int partitions;
        final List<List<Integer>> replicas = new ArrayList<>();

        Topic(String name, Uuid id) {
            this.name = name;
            this.id = id;
        }
    }

    MetadataImage image = MetadataImage.EMPTY;
    final Map<Integer, String> brokerRacks = new LinkedHashMap<>();
    final Map<String, Topic> topics = new LinkedHashMap<>();
    /** Every topic version the history went through, for the topic-metadata snapshot (with valid_from_ms). */
    final List<Map<String, Object>> timeline = new ArrayList<>();
    private long provenance = 1;

    MetadataDelta newDelta() {
        return new MetadataDelta.Builder().setImage(image).build();
    }

    MetadataImage apply(MetadataDelta delta) {
        image = delta.apply(new MetadataProvenance(provenance, 0, provenance, true));
        provenance++;
        return image;
    }

    void registerBroker(MetadataDelta delta, int id, String rack) {
        brokerRacks.put(id, rack);
        delta.replay(new RegisterBrokerRecord().setBrokerId(id).setBrokerEpoch(100 + id).setRack(rack).setFenced(false)
            .setIncarnationId(new Uuid(7L, 1000L + id)));
    }

    private List<Integer> defaultReplicas(int partition) {
        List<Integer> ids = new ArrayList<>(brokerRacks.keySet());
        List<Integer> out = new ArrayList<>();
        if (ids.isEmpty()) return out;
        int factor = Math.min(3, ids.size());
        for (int i = 0; i < factor; i++) out.add(ids.get((partition + i) % ids.size()));
        return out;
    }

    void createTopic(MetadataDelta delta, String name, Uuid id, int partitions, List<List<Integer>> replicas) {
        Topic topic = new Topic(name, id);
        topics.put(name, topic);
        delta.replay(new TopicRecord().setName(name).setTopicId(id));
        addPartitions(delta, topic, partitions, replicas);
    }

    void addPartitions(MetadataDelta delta, Topic topic, int newCount, List<List<Integer>> replicas) {
        for (int p = topic.partitions; p < newCount; p++) {
            List<Integer> r = replicas != null && p < replicas.size() && replicas.get(p) != null ? replicas.get(p) : defaultReplicas(p);
            topic.replicas.add(r);
            delta.replay(new PartitionRecord().setPartitionId(p).setTopicId(topic.id).setReplicas(r).setIsr(r)
                .setLeader(r.isEmpty() ? -1 : r.get(0)).setLeaderEpoch(0).setPartitionEpoch(0));
        }
        topic.partitions = Math.max(topic.partitions, newCount);
    }

    void deleteTopic(MetadataDelta delta, Topic topic) {
        topics.remove(topic.name);
        delta.replay(new RemoveTopicRecord().setTopicId(topic.id));
    }

    /** A topic-metadata snapshot entry (the golden assignor layout, plus when it became true). */
    Map<String, Object> describe(Topic topic, long validFromMs) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("name", topic.name);
        out.put("id", topic.id.toString());
        out.put("partitions", topic.partitions);
        List<List<String>> racks = new ArrayList<>();
        boolean any = false;
        for (List<Integer> r : topic.replicas) {
            List<String> rr = new ArrayList<>();
            for (int b : r) {
                String rack = brokerRacks.get(b);
                if (rack != null) {
                    rr.add(rack);
                    any = true;
                }
            }
            racks.add(rr);
        }
        out.put("partition_racks", any ? racks : null);
        out.put("valid_from_ms", validFromMs);
        return out;
    }
}
