package offsetsaudit.scenarios;

import java.time.Duration;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * One group member: a {@link KafkaConsumer} polled by a thread of its own (a consumer is single-threaded), as
 * an application's poll loop is. Other threads act on it through {@link #call}, which runs on the member's
 * thread between two polls. Offsets are committed only when asked ({@link #commit}), so a held group writes
 * nothing while the tests read the broker's state.
 */
final class Member implements AutoCloseable {
    final String name;
    final String groupId;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final Thread thread;
    private final BlockingQueue<Runnable> calls = new LinkedBlockingQueue<>();
    private volatile boolean running = true;
    private volatile Set<TopicPartition> assignment = Set.of();
    private volatile Throwable failure;
    private long consumed;

    Member(String name, Properties props, Consumer<KafkaConsumer<byte[], byte[]>> subscribe) {
        this.name = name;
        this.groupId = props.getProperty("group.id");
        this.consumer = new KafkaConsumer<>(props);
        this.thread = new Thread(() -> loop(subscribe), "member-" + name);
        this.thread.setDaemon(true);
        this.thread.start();
    }

    static Member subscribed(String name, Properties props, Collection<String> topics) {
        List<String> copy = List.copyOf(topics);
        return new Member(name, props, c -> c.subscribe(copy));
    }

    static Member subscribedPattern(String name, Properties props, Pattern pattern) {
        return new Member(name, props, c -> c.subscribe(pattern));
    }

    private void loop(Consumer<KafkaConsumer<byte[], byte[]>> subscribe) {
        try {
            subscribe.accept(consumer);
            while (running) {
                Runnable call;
                while ((call = calls.poll()) != null) {
                    call.run();
                }
                try {
                    consumed += consumer.poll(Duration.ofMillis(50)).count();
                } catch (org.apache.kafka.common.errors.WakeupException stopped) {
                    throw stopped;
                } catch (RuntimeException error) {
                    // a broker restart surfaces in poll as errors the client recovers from by itself (a member
                    // the reloaded coordinator fenced rejoins); an application's poll loop carries on
                    if (!retriable(error)) {
                        throw error;
                    }
                }
                assignment = Set.copyOf(consumer.assignment());
            }
        } catch (org.apache.kafka.common.errors.WakeupException stopped) {
            // close() woke the poll up
        } catch (Throwable error) {
            failure = error;
        }
    }

    /** Runs {@code action} on the member's thread and waits for it. An error a client is told to retry (a
     *  broker restarting: disconnects, timeouts, a stale member epoch or a rebalance in progress) is retried,
     *  as an application's loop does. */
    <T> T call(java.util.function.Function<KafkaConsumer<byte[], byte[]>, T> action) {
        for (int attempt = 1; ; attempt++) {
            check();
            CompletableFuture<T> result = new CompletableFuture<>();
            calls.add(() -> {
                try {
                    result.complete(action.apply(consumer));
                } catch (Throwable error) {
                    result.completeExceptionally(error);
                }
            });
            try {
                return result.get(90, TimeUnit.SECONDS);
            } catch (java.util.concurrent.ExecutionException error) {
                if (attempt >= 20 || !retriable(error.getCause())) {
                    throw new IllegalStateException(name + ": call failed", error);
                }
                Scenarios.sleep(250L * Math.min(attempt, 8));
            } catch (Exception error) {
                throw new IllegalStateException(name + ": call failed", error);
            }
        }
    }

    static boolean retriable(Throwable error) {
        return error instanceof org.apache.kafka.common.errors.RetriableException
            || error instanceof org.apache.kafka.common.errors.DisconnectException
            || error instanceof org.apache.kafka.common.errors.TimeoutException
            || error instanceof org.apache.kafka.common.errors.RebalanceInProgressException
            || error instanceof org.apache.kafka.clients.consumer.CommitFailedException
            || error instanceof org.apache.kafka.common.errors.StaleMemberEpochException
            || error instanceof org.apache.kafka.common.errors.UnknownMemberIdException
            || error instanceof org.apache.kafka.common.errors.FencedMemberEpochException;
    }

    /** Commits the positions of the member's assigned partitions (what it has consumed). */
    void commit() {
        call(c -> {
            c.commitSync();
            return null;
        });
    }

    /** Commits the given offsets for the member's group, from the member's thread. */
    void commit(Map<TopicPartition, OffsetAndMetadata> offsets) {
        call(c -> {
            c.commitSync(offsets);
            return null;
        });
    }

    void resubscribe(Collection<String> topics) {
        List<String> copy = List.copyOf(topics);
        call(c -> {
            c.subscribe(copy);
            return null;
        });
    }

    Set<TopicPartition> assignment() {
        check();
        return assignment;
    }

    long consumed() {
        return consumed;
    }

    /** Waits until the member's assignment satisfies {@code test}. */
    Set<TopicPartition> awaitAssignment(Predicate<Set<TopicPartition>> test, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            Set<TopicPartition> now = assignment();
            if (test.test(now)) {
                return now;
            }
            Scenarios.sleep(50);
        }
        throw new IllegalStateException(name + ": assignment " + assignment + " did not reach the expected one");
    }

    /** Waits until every partition the member is assigned is consumed to its end. */
    void awaitCaughtUp(Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            boolean done = call(c -> {
                Set<TopicPartition> owned = new HashSet<>(c.assignment());
                if (owned.isEmpty()) {
                    return false;
                }
                Map<TopicPartition, Long> ends = c.endOffsets(owned);
                try {
                    for (TopicPartition tp : owned) {
                        if (c.position(tp) < ends.get(tp)) {
                            return false;
                        }
                    }
                } catch (IllegalStateException revoked) {
                    // the KIP-848 consumer reconciles in the background: a partition went away meanwhile
                    return false;
                }
                return true;
            });
            if (done) {
                return;
            }
            Scenarios.sleep(50);
        }
        throw new IllegalStateException(name + ": did not catch up with its partitions");
    }

    private void check() {
        if (failure != null) {
            throw new IllegalStateException(name + " failed: " + failure, failure);
        }
    }

    /** Leaves the group as an application's shutdown does ({@code close()}: a LeaveGroup, or the static
     *  member's temporary leave). */
    @Override
    public void close() {
        if (!thread.isAlive()) {
            consumer.close();
            return;
        }
        calls.add(() -> {
            running = false;
        });
        try {
            thread.join(30_000);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
        consumer.close(Duration.ofSeconds(20));
        check();
    }
}
