package offsetsaudit.oracle;

import org.apache.kafka.common.utils.Time;

import java.util.function.Supplier;

/** The coordinator's clock, moved only by the driver: every history is reproducible to the millisecond. */
final class ManualClock implements Time {
    private long nowMs;

    ManualClock(long startMs) {
        this.nowMs = startMs;
    }

    void advanceTo(long ms) {
        if (ms > nowMs) nowMs = ms;
    }

    @Override
    public long milliseconds() {
        return nowMs;
    }

    @Override
    public long nanoseconds() {
        return nowMs * 1_000_000L;
    }

    @Override
    public void sleep(long ms) {
        nowMs += ms;
    }

    @Override
    public void waitObject(Object obj, Supplier<Boolean> condition, long deadlineMs) {
        if (!condition.get()) throw new IllegalStateException("the oracle's clock never waits");
    }
}
