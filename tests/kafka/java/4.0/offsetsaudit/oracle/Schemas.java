package offsetsaudit.oracle;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.types.BoundField;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.TaggedFields;
import org.apache.kafka.common.protocol.types.Type;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;

import java.io.PrintStream;
import java.lang.reflect.Method;
import java.util.Map;
import java.util.Optional;

/**
 * Every coordinator record type's key and value schemas as this Kafka version's generated classes hold them: the
 * record types {@code GroupCoordinatorRecordSerde} knows (its key and value message per type id), and per message its
 * supported versions and, per version, the {@code SCHEMAS} entry: field names (the specs' names in snake case, as
 * the generated schemas have them), types, nullability, tagged fields and their tags, nested structs.
 */
final class Schemas {
    private Schemas() { }

    static void main(String[] args, PrintStream out) throws Exception {
        GroupCoordinatorRecordSerde serde = new GroupCoordinatorRecordSerde();
        ObjectNode root = Coordinator.JSON.objectNode();
        root.put("kafka_line", Compat.KAFKA_LINE);
        root.put("struct_nullability", structNullability());
        ArrayNode types = root.putArray("record_types");
        for (short id = 0; id < 64; id++) {
            ApiMessage key = message(serde, "apiMessageKeyFor", id);
            ApiMessage value = message(serde, "apiMessageValueFor", id);
            if (key == null && value == null) continue;
            ObjectNode type = types.addObject();
            type.put("record_type", id);
            if (key != null) type.set("key", describe(key));
            if (value != null) type.set("value", describe(value));
        }
        out.println(Main.MAPPER.writeValueAsString(root));
    }

    /**
     * Whether this version's generated schemas can say a struct is nullable: before the protocol types gained a
     * nullable schema, the generator wrote a nullable struct field with its plain (never-null) struct schema, so
     * only a jar with that class tells a nullable struct from a required one.
     */
    private static boolean structNullability() {
        try {
            Class.forName("org.apache.kafka.common.protocol.types.NullableSchema");
            return true;
        } catch (ClassNotFoundException e) {
            return false;
        }
    }

    private static ApiMessage message(GroupCoordinatorRecordSerde serde, String method, short id) {
        try {
            Method m = Reflect.method(serde.getClass(), method, 1);
            return m == null ? null : (ApiMessage) m.invoke(serde, id);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    private static ObjectNode describe(ApiMessage message) throws ReflectiveOperationException {
        ObjectNode node = Coordinator.JSON.objectNode();
        node.put("name", message.getClass().getSimpleName());
        node.put("lowest_version", message.lowestSupportedVersion());
        node.put("highest_version", message.highestSupportedVersion());
        Schema[] schemas = (Schema[]) message.getClass().getField("SCHEMAS").get(null);
        ObjectNode versions = node.putObject("versions");
        for (int v = message.lowestSupportedVersion(); v <= message.highestSupportedVersion() && v < schemas.length; v++) {
            if (schemas[v] == null) continue;
            versions.set(String.valueOf(v), schema(schemas[v]));
        }
        return node;
    }

    private static ObjectNode schema(Schema schema) {
        ObjectNode node = Coordinator.JSON.objectNode();
        ArrayNode fields = node.putArray("fields");
        boolean flexible = false;
        for (BoundField bound : schema.fields()) {
            Field field = bound.def;
            if (field.type instanceof TaggedFields) {
                flexible = true;
                @SuppressWarnings("unchecked")
                Map<Integer, Field> tagged = (Map<Integer, Field>) Reflect.field(field.type, "fields");
                ArrayNode tags = node.putArray("tagged_fields");
                if (tagged != null) tagged.forEach((tag, f) -> {
                    ObjectNode t = field(f);
                    t.put("tag", tag);
                    tags.add(t);
                });
                continue;
            }
            fields.add(field(field));
        }
        node.put("flexible", flexible);
        return node;
    }

    private static ObjectNode field(Field field) {
        ObjectNode node = Coordinator.JSON.objectNode();
        node.put("name", field.name);
        type(node, field.type);
        return node;
    }

    private static void type(ObjectNode node, Type type) {
        node.put("nullable", type.isNullable());
        Optional<Type> element = type.arrayElementType();
        if (element.isPresent()) {
            ObjectNode of = node.putObject("array_of");
            type(of, element.get());
            node.put("type", "array");
        } else if (type instanceof Schema) {
            node.put("type", "struct");
            node.set("struct", schema((Schema) type));
        } else {
            node.put("type", type.toString());
        }
    }
}
