package offsetsaudit.oracle;

import java.util.ArrayList;
import java.util.List;

/** One batch of a segment as read back from the file: its header fields and its records' bytes. */
final class LogBatch {
    final long baseOffset;
    final long lastOffset;
    final long maxTimestamp;
    final long producerId;
    final short producerEpoch;
    final boolean transactional;
    final boolean control;
    String controlType;
    int coordinatorEpoch = -1;
    /** [key, value, offset (8 bytes), timestamp (8 bytes)] per record; value null for a tombstone. */
    final List<byte[][]> records = new ArrayList<>();

    LogBatch(long baseOffset, long lastOffset, long maxTimestamp, long producerId, short producerEpoch,
             boolean transactional, boolean control) {
        this.baseOffset = baseOffset;
        this.lastOffset = lastOffset;
        this.maxTimestamp = maxTimestamp;
        this.producerId = producerId;
        this.producerEpoch = producerEpoch;
        this.transactional = transactional;
        this.control = control;
    }
}
