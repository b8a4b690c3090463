package offsetsaudit.oracle;

import java.lang.reflect.Field;
import java.lang.reflect.Method;

/**
 * Reads of the coordinator's in-memory state that have no public accessor in every Kafka version (the shard's
 * managers, a group's assignment timestamp): by name, so one source serves 4.0 to 4.4, and {@code null} when a
 * version lacks the member.
 */
final class Reflect {
    private Reflect() { }

    static Object field(Object target, String name) {
        for (Class<?> c = target.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(target);
            } catch (NoSuchFieldException e) {
                // try the superclass
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }
        return null;
    }

    static Method method(Class<?> type, String name, int arity) {
        for (Class<?> c = type; c != null; c = c.getSuperclass()) {
            for (Method m : c.getDeclaredMethods()) {
                if (m.getName().equals(name) && m.getParameterCount() == arity) {
                    m.setAccessible(true);
                    return m;
                }
            }
        }
        return null;
    }

    /** {@code target.name(args...)}, or {@code null} when the method does not exist in this Kafka version. */
    static Object call(Object target, String name, Object... args) {
        Method m = method(target.getClass(), name, args.length);
        if (m == null) return null;
        try {
            return m.invoke(target, args);
        } catch (java.lang.reflect.InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof RuntimeException) throw (RuntimeException) cause;
            throw new IllegalStateException(cause);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    static boolean has(Object target, String name, int arity) {
        return method(target.getClass(), name, arity) != null;
    }
}
