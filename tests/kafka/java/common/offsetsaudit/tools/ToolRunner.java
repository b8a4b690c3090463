package offsetsaudit.tools;

import java.io.ByteArrayOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;

/**
 * Runs several of Kafka's command-line tools (kafka-dump-log, kafka-consumer-groups, kafka-share-groups,
 * kafka-streams-groups, ...) one after the other in one JVM, so the tests pay one JVM start for all of them.
 *
 * <p>Usage: {@code ToolRunner <invocations file> <output folder>}. Each line of the file is one invocation, a
 * main class and its arguments separated by U+001F. For invocation {@code i} the tool's standard output and
 * error go to {@code i.out} and {@code i.err} and its exit code to {@code i.rc}.
 *
 * <p>The tools end with Kafka's {@code Exit.exit(code)}; its exit procedure is replaced by one that throws, so
 * the code is recorded and the next tool runs. Standard output is one switchable stream installed before any
 * tool runs, because Scala's {@code Console} keeps the stream it first saw.
 */
public final class ToolRunner {

    /** The exit code the running tool asked for first: in its own JVM that call would have ended it, whatever a
     *  tool that catches the throw (some catch every Throwable) does after it. */
    private static volatile Integer firstExit;

    private static final class ToolExit extends RuntimeException {
        final int code;

        ToolExit(int code) {
            super(null, null, false, false);
            this.code = code;
        }
    }

    /** An output stream whose destination is switched per invocation. */
    private static final class Switch extends OutputStream {
        private volatile OutputStream target = new ByteArrayOutputStream();

        void to(OutputStream next) {
            target = next;
        }

        @Override
        public void write(int b) throws IOException {
            target.write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            target.write(b, off, len);
        }

        @Override
        public void flush() throws IOException {
            target.flush();
        }
    }

    public static void main(String[] args) throws Exception {
        List<String> lines = Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8);
        Path out = Paths.get(args[1]);
        Switch stdout = new Switch();
        Switch stderr = new Switch();
        PrintStream realErr = System.err;
        System.setOut(new PrintStream(stdout, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(stderr, true, StandardCharsets.UTF_8));
        catchExits();
        int i = 0;
        for (String line : lines) {
            if (line.isEmpty()) {
                continue;
            }
            String[] parts = line.split("\u001f", -1);
            String[] toolArgs = new String[parts.length - 1];
            System.arraycopy(parts, 1, toolArgs, 0, toolArgs.length);
            int code;
            try (OutputStream o = new FileOutputStream(out.resolve(i + ".out").toFile());
                 OutputStream e = new FileOutputStream(out.resolve(i + ".err").toFile())) {
                stdout.to(o);
                stderr.to(e);
                code = run(parts[0], toolArgs, e);
                System.out.flush();
                System.err.flush();
            } finally {
                stdout.to(new ByteArrayOutputStream());
                stderr.to(new ByteArrayOutputStream());
            }
            Files.write(out.resolve(i + ".rc"), Integer.toString(code).getBytes(StandardCharsets.UTF_8));
            i++;
        }
        realErr.flush();
        System.exit(0);
    }

    private static int run(String mainClass, String[] toolArgs, OutputStream err) {
        firstExit = null;
        try {
            Method main = Class.forName(mainClass).getMethod("main", String[].class);
            main.invoke(null, (Object) toolArgs);
            return firstExit == null ? 0 : firstExit;
        } catch (InvocationTargetException wrapped) {
            if (firstExit != null) {
                return firstExit;
            }
            Throwable cause = wrapped.getCause();
            while (cause != null && !(cause instanceof ToolExit) && cause.getCause() != null) {
                cause = cause.getCause();
            }
            if (cause instanceof ToolExit) {
                return ((ToolExit) cause).code;
            }
            wrapped.getCause().printStackTrace(new PrintStream(err, true, StandardCharsets.UTF_8));
            return 1;
        } catch (ReflectiveOperationException notFound) {
            notFound.printStackTrace(new PrintStream(err, true, StandardCharsets.UTF_8));
            return 127;
        }
    }

    /** Replaces Kafka's exit and halt procedures (the class moved between versions) by a throw. */
    private static void catchExits() throws Exception {
        for (String name : new String[] {"org.apache.kafka.common.utils.internals.Exit", "org.apache.kafka.common.utils.Exit"}) {
            Class<?> exit;
            try {
                exit = Class.forName(name);
            } catch (ClassNotFoundException absent) {
                continue;
            }
            Class<?> procedure = Class.forName(name + "$Procedure");
            Object thrower = Proxy.newProxyInstance(procedure.getClassLoader(), new Class<?>[] {procedure},
                (proxy, method, methodArgs) -> {
                    if (method.getDeclaringClass() == Object.class) {
                        return method.getName().equals("hashCode") ? System.identityHashCode(proxy)
                            : method.getName().equals("equals") ? proxy == methodArgs[0] : "ToolExit";
                    }
                    int code = (Integer) methodArgs[0];
                    if (firstExit == null) {
                        firstExit = code;
                    }
                    throw new ToolExit(code);
                });
            exit.getMethod("setExitProcedure", procedure).invoke(null, thrower);
            exit.getMethod("setHaltProcedure", procedure).invoke(null, thrower);
        }
    }
}
