package offsetsaudit.oracle;

import org.apache.kafka.coordinator.common.runtime.CoordinatorTimer;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The shard's timer, fired by the driver at mock time. Like the runtime's {@code EventBasedCoordinatorTimer}: one
 * task per key (scheduling a key again replaces its task), a task that fires is removed before its operation runs,
 * and a failed operation with retry is scheduled again after its back-off.
 */
@SuppressWarnings({"rawtypes", "unchecked"})
final class ManualTimer implements CoordinatorTimer {
    static final class Task {
        final String key;
        final long deadlineMs;
        final long sequence;
        final boolean retry;
        final long retryBackoffMs;
        final TimeoutOperation operation;

        Task(String key, long deadlineMs, long sequence, boolean retry, long retryBackoffMs, TimeoutOperation operation) {
            this.key = key;
            this.deadlineMs = deadlineMs;
            this.sequence = sequence;
            this.retry = retry;
            this.retryBackoffMs = retryBackoffMs;
            this.operation = operation;
        }
    }

    private final ManualClock clock;
    private final Map<String, Task> tasks = new HashMap<>();
    private long sequence;

    ManualTimer(ManualClock clock) {
        this.clock = clock;
    }

    @Override
    public void schedule(String key, long delay, TimeUnit unit, boolean retry, TimeoutOperation operation) {
        schedule(key, delay, unit, retry, 500, operation);
    }

    @Override
    public void schedule(String key, long delay, TimeUnit unit, boolean retry, long retryBackoff, TimeoutOperation operation) {
        tasks.put(key, new Task(key, clock.milliseconds() + unit.toMillis(delay), sequence++, retry, retryBackoff, operation));
    }

    @Override
    public void scheduleIfAbsent(String key, long delay, TimeUnit unit, boolean retry, TimeoutOperation operation) {
        if (!tasks.containsKey(key)) schedule(key, delay, unit, retry, operation);
    }

    @Override
    public void cancel(String key) {
        tasks.remove(key);
    }

    public boolean isScheduled(String key) {
        return tasks.containsKey(key);
    }

    /** The earliest deadline of a scheduled task, or {@code Long.MAX_VALUE}. */
    long nextDeadline() {
        long next = Long.MAX_VALUE;
        for (Task task : tasks.values()) next = Math.min(next, task.deadlineMs);
        return next;
    }

    /** The task due first at {@code nowMs} (earliest deadline, then the order it was scheduled), removed; or null. */
    Task pollDue(long nowMs) {
        Task first = null;
        for (Task task : tasks.values()) {
            if (task.deadlineMs > nowMs) continue;
            if (first == null || task.deadlineMs < first.deadlineMs
                || (task.deadlineMs == first.deadlineMs && task.sequence < first.sequence)) first = task;
        }
        if (first != null) tasks.remove(first.key);
        return first;
    }

    List<String> keys() {
        return new ArrayList<>(tasks.keySet());
    }
}
