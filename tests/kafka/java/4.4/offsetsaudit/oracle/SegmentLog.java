package offsetsaudit.oracle;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.record.internal.EndTransactionMarker;
import org.apache.kafka.common.record.internal.FileLogInputStream;
import org.apache.kafka.common.record.internal.FileRecords;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.MemoryRecordsBuilder;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;

import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * The oracle's log: batches built as the coordinator runtime builds them and segment files written and read back
 * through the broker's own log classes, for Kafka 4.4, where those classes moved to {@code record.internal}. Java has
 * no import alias, so this copy differs from the lower versions' one only in its imports.
 */
final class SegmentLog {
    private SegmentLog() { }

    /** One data batch as the coordinator runtime builds it (magic 2, CreateTime, base sequence 0, no leader epoch). */
    static ByteBuffer dataBatch(long baseOffset, long timestamp, long producerId, short producerEpoch, String compression,
                                List<byte[][]> keyValues) {
        ByteBuffer buffer = ByteBuffer.allocate(1024 + keyValues.stream().mapToInt(kv -> 64 + kv[0].length
            + (kv[1] == null ? 0 : kv[1].length)).sum());
        MemoryRecordsBuilder builder = new MemoryRecordsBuilder(buffer, RecordBatch.CURRENT_MAGIC_VALUE,
            compression(compression), TimestampType.CREATE_TIME, baseOffset, timestamp, producerId, producerEpoch, 0,
            producerId != RecordBatch.NO_PRODUCER_ID, false, RecordBatch.NO_PARTITION_LEADER_EPOCH, buffer.capacity());
        for (byte[][] kv : keyValues) builder.append(timestamp, kv[0], kv[1]);
        return builder.build().buffer();
    }

    /** A transaction marker batch as {@code CoordinatorRuntime.completeTransaction} writes it. */
    static ByteBuffer controlBatch(long offset, long timestamp, long producerId, short producerEpoch, boolean commit,
                                   int coordinatorEpoch) {
        return MemoryRecords.withEndTransactionMarker(offset, timestamp, RecordBatch.NO_PARTITION_LEADER_EPOCH, producerId,
            producerEpoch, new EndTransactionMarker(commit ? ControlRecordType.COMMIT : ControlRecordType.ABORT,
                coordinatorEpoch)).buffer();
    }

    private static Compression compression(String name) {
        switch (name == null ? "none" : name) {
            case "gzip": return Compression.gzip().build();
            case "snappy": return Compression.snappy().build();
            case "lz4": return Compression.lz4().build();
            case "zstd": return Compression.zstd().build();
            default: return Compression.NONE;
        }
    }

    /** Appends the batches to a segment file through {@code FileRecords}, the class the broker's log writes with. */
    static void writeSegment(File file, List<ByteBuffer> batches) throws IOException {
        file.getParentFile().mkdirs();
        try (FileRecords records = FileRecords.open(file)) {
            for (ByteBuffer batch : batches) records.append(MemoryRecords.readableRecords(batch.duplicate()));
            records.flush();
        }
    }

    /** Every batch of a segment file, read back with {@code FileRecords.batches()} as kafka-dump-log reads it. */
    static List<LogBatch> readSegment(File file) throws IOException {
        List<LogBatch> out = new ArrayList<>();
        try (FileRecords records = FileRecords.open(file, false)) {
            for (FileLogInputStream.FileChannelRecordBatch batch : records.batches()) {
                LogBatch b = new LogBatch(batch.baseOffset(), batch.lastOffset(), batch.maxTimestamp(), batch.producerId(),
                    batch.producerEpoch(), batch.isTransactional(), batch.isControlBatch());
                for (Record record : batch) {
                    byte[] key = record.hasKey() ? bytes(record.key()) : null;
                    byte[] value = record.hasValue() ? bytes(record.value()) : null;
                    if (batch.isControlBatch()) {
                        b.controlType = ControlRecordType.parse(record.key()) == ControlRecordType.COMMIT ? "COMMIT" : "ABORT";
                        b.coordinatorEpoch = EndTransactionMarker.deserialize(record).coordinatorEpoch();
                    }
                    b.records.add(new byte[][]{key, value, longBytes(record.offset()), longBytes(record.timestamp())});
                }
                out.add(b);
            }
        }
        return out;
    }

    /** Every record of a segment file with its batch's fields, as {@code FileRecords.batches()} gives them (legacy
     *  magic 0 and 1 wrappers are iterated to their inner messages, as kafka-dump-log's deep iteration does). */
    static List<com.fasterxml.jackson.databind.node.ObjectNode> describeSegment(File file) throws IOException {
        List<com.fasterxml.jackson.databind.node.ObjectNode> out = new ArrayList<>();
        java.util.Base64.Encoder b64 = java.util.Base64.getEncoder();
        try (FileRecords records = FileRecords.open(file, false)) {
            for (FileLogInputStream.FileChannelRecordBatch batch : records.batches()) {
                for (Record record : batch) {
                    com.fasterxml.jackson.databind.node.ObjectNode o =
                        com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.objectNode();
                    o.put("offset", record.offset());
                    o.put("timestamp", record.timestamp());
                    o.put("timestamp_type", batch.timestampType().toString());
                    o.put("batch_base_offset", batch.baseOffset());
                    o.put("batch_last_offset", batch.lastOffset());
                    o.put("batch_magic", batch.magic());
                    o.put("compression", batch.compressionType().name);
                    o.put("producer_id", batch.producerId());
                    o.put("producer_epoch", batch.producerEpoch());
                    o.put("base_sequence", batch.baseSequence());
                    o.put("partition_leader_epoch", batch.partitionLeaderEpoch());
                    o.put("is_transactional", batch.isTransactional());
                    o.put("is_control", batch.isControlBatch());
                    if (batch.isControlBatch()) {
                        o.put("control_type", ControlRecordType.parse(record.key()) == ControlRecordType.COMMIT ? "COMMIT" : "ABORT");
                        o.put("coordinator_epoch", EndTransactionMarker.deserialize(record).coordinatorEpoch());
                    } else {
                        o.putNull("control_type");
                        o.putNull("coordinator_epoch");
                    }
                    if (record.hasKey()) o.put("key_b64", b64.encodeToString(bytes(record.key())));
                    else o.putNull("key_b64");
                    if (record.hasValue()) o.put("value_b64", b64.encodeToString(bytes(record.value())));
                    else o.putNull("value_b64");
                    out.add(o);
                }
            }
        }
        return out;
    }

    private static byte[] bytes(ByteBuffer buffer) {
        byte[] out = new byte[buffer.remaining()];
        buffer.duplicate().get(out);
        return out;
    }

    private static byte[] longBytes(long value) {
        return ByteBuffer.allocate(8).putLong(value).array();
    }
}
