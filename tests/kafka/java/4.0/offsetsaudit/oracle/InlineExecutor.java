package offsetsaudit.oracle;

import org.apache.kafka.coordinator.common.runtime.CoordinatorExecutor;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.Map;

/**
 * The shard's background executor (regular-expression resolution, off-loaded assignors), run by the driver right
 * after the write that scheduled the task. Like {@code CoordinatorExecutorImpl}: one task per key, and a task whose
 * key was cancelled or re-used in the meantime does not apply its result.
 */
@SuppressWarnings({"rawtypes", "unchecked"})
final class InlineExecutor implements CoordinatorExecutor {
    static final class Task {
        final String key;
        final TaskRunnable runnable;
        final TaskOperation operation;

        Task(String key, TaskRunnable runnable, TaskOperation operation) {
            this.key = key;
            this.runnable = runnable;
            this.operation = operation;
        }
    }

    private final Map<String, Task> tasks = new HashMap<>();
    private final Deque<Task> queue = new ArrayDeque<>();

    @Override
    public boolean schedule(String key, TaskRunnable task, TaskOperation operation) {
        if (tasks.containsKey(key)) return false;
        Task t = new Task(key, task, operation);
        tasks.put(key, t);
        queue.add(t);
        return true;
    }

    @Override
    public boolean isScheduled(String key) {
        return tasks.containsKey(key);
    }

    @Override
    public void cancel(String key) {
        tasks.remove(key);
    }

    /** The next task still current for its key, or null; the caller runs it and then calls {@link #complete}. */
    Task poll() {
        while (!queue.isEmpty()) {
            Task t = queue.poll();
            if (tasks.get(t.key) == t) return t;
        }
        return null;
    }

    /** Whether the task is still the current one of its key (then it is removed and its result applies). */
    boolean complete(Task t) {
        return tasks.remove(t.key, t);
    }
}
