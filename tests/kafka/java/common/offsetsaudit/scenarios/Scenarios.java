package offsetsaudit.scenarios;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ConsumerGroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Real Kafka clients driving real group scenarios against a broker, so its {@code __consumer_offsets} holds
 * what Kafka writes for them: classic groups (eager and cooperative rebalances, joins, leaves, a crash past the
 * session timeout, static members), KIP-848 consumer groups (uniform and range assignors, subscription and
 * partition changes, a regex, a static member's restart), a share group, a Kafka Streams application on the
 * streams protocol, transactional offset commits, a classic group upgraded to the consumer protocol and one
 * downgraded back, and groups left empty for kafka-consumer-groups to delete or reset.
 *
 * <p>Usage: {@code Scenarios run <bootstrap> <output folder> <prefix> <scenario>...} runs the scenarios at
 * once, each on its own topics and groups (named from {@code prefix}), until every one holds its groups in a
 * stable state with members alive. It then writes {@code scenarios.json} (each scenario's outcome and groups)
 * and prints {@code READY}; a line on standard input ends the run: the held members close and it prints
 * {@code DONE}. A scenario the version has no client API for is reported {@code unsupported}.
 *
 * <p>{@code Scenarios member <bootstrap> <group> <protocol> <topic>} is one member in a process of its own,
 * which prints {@code ASSIGNED} once it owns partitions and then polls until the parent kills it (-9): a crash.
 */
public final class Scenarios {

    /** One scenario: what it does until its groups are held, and the groups it leaves for the judges. */
    interface Scenario {
        void run(Context context) throws Exception;
    }

    static final Map<String, String> VERSIONED = Map.of(
        "share", "offsetsaudit.scenarios.ShareScenario",
        "streams", "offsetsaudit.scenarios.StreamsScenario",
        "consumer_regex", "offsetsaudit.scenarios.RegexScenario");

    static Map<String, Scenario> registry() {
        Map<String, Scenario> scenarios = new LinkedHashMap<>();
        scenarios.put("classic_eager", ClassicScenarios::eager);
        scenarios.put("classic_cooperative", ClassicScenarios::cooperative);
        scenarios.put("classic_static", ClassicScenarios::staticMembers);
        scenarios.put("consumer_uniform", ConsumerScenarios::uniform);
        scenarios.put("consumer_range", ConsumerScenarios::range);
        scenarios.put("consumer_mixed", ConsumerScenarios::mixed);
        scenarios.put("consumer_static", ConsumerScenarios::staticMember);
        scenarios.put("transactions", OtherScenarios::transactions);
        scenarios.put("migration", OtherScenarios::migration);
        scenarios.put("admin_groups", OtherScenarios::adminGroups);
        for (Map.Entry<String, String> versioned : VERSIONED.entrySet()) {
            Scenario scenario;
            try {
                Object instance = Class.forName(versioned.getValue()).getDeclaredConstructor().newInstance();
                scenario = (Scenario) instance;
            } catch (ReflectiveOperationException absent) {
                scenario = null;
            }
            scenarios.put(versioned.getKey(), scenario);
        }
        return scenarios;
    }

    public static void main(String[] args) throws Exception {
        if (args.length >= 1 && args[0].equals("member")) {
            crashableMember(args[1], args[2], args[3], args[4]);
            return;
        }
        if (args.length < 4 || !args[0].equals("run")) {
            System.err.println("usage: Scenarios run <bootstrap> <output folder> <prefix> <scenario>... | member ...");
            System.exit(2);
        }
        String bootstrap = args[1];
        Path out = Paths.get(args[2]);
        String prefix = args[3];
        Map<String, Scenario> registry = registry();
        List<String> names = new ArrayList<>();
        for (int i = 4; i < args.length; i++) {
            if (args[i].equals("all")) {
                names.addAll(registry.keySet());
            } else {
                names.add(args[i]);
            }
        }
        CountDownLatch stop = new CountDownLatch(1);
        Map<String, Context> contexts = new LinkedHashMap<>();
        List<Thread> threads = new ArrayList<>();
        try (Admin admin = Admin.create(clientProps(bootstrap))) {
            for (String name : names) {
                Context context = new Context(name, bootstrap, prefix + "-" + name, admin, stop, out);
                contexts.put(name, context);
                if (!registry.containsKey(name)) {
                    context.finish("failed", "no scenario named " + name + "; known: " + registry.keySet());
                    continue;
                }
                Scenario scenario = registry.get(name);
                if (scenario == null) {
                    context.finish("unsupported", "no client API for it in this Kafka version");
                    continue;
                }
                Thread thread = new Thread(() -> context.runScenario(scenario), "scenario-" + name);
                thread.start();
                threads.add(thread);
            }
            for (Context context : contexts.values()) {
                context.ready.await();
            }
            writeReport(out.resolve("scenarios.json"), contexts.values());
            System.out.println("READY");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
            stop.countDown();
            for (Thread thread : threads) {
                thread.join(120_000);
            }
            writeReport(out.resolve("scenarios-closed.json"), contexts.values());
        }
        System.out.println("DONE");
        System.out.flush();
        System.exit(0);
    }

    /** The shared state of one scenario: its names, the broker's admin client, and the hold at its end. */
    static final class Context {
        final String scenario;
        final String bootstrap;
        final String prefix;
        final Admin admin;
        final Path out;
        final CountDownLatch ready = new CountDownLatch(1);
        private final CountDownLatch stop;
        final List<String> groups = new ArrayList<>();
        final Map<String, String> groupKinds = new ConcurrentHashMap<>();
        final List<String> notes = new ArrayList<>();
        private final List<AutoCloseable> held = new ArrayList<>();
        volatile String status = "running";
        volatile String error;

        Context(String scenario, String bootstrap, String prefix, Admin admin, CountDownLatch stop, Path out) {
            this.scenario = scenario;
            this.bootstrap = bootstrap;
            this.prefix = prefix;
            this.admin = admin;
            this.stop = stop;
            this.out = out;
        }

        void runScenario(Scenario scenario) {
            try {
                scenario.run(this);
                finish("ok", null);
                stop.await();
            } catch (Throwable failure) {
                java.io.StringWriter text = new java.io.StringWriter();
                failure.printStackTrace(new java.io.PrintWriter(text));
                finish("failed", text.toString());
            } finally {
                closeHeld();
            }
        }

        void finish(String outcome, String message) {
            if (ready.getCount() > 0) {
                status = outcome;
                error = message;
                ready.countDown();
            }
        }

        /** Keeps {@code resource} (a member, a Streams instance) alive until the run ends, then closes it. */
        <T extends AutoCloseable> T hold(T resource) {
            synchronized (held) {
                held.add(resource);
            }
            return resource;
        }

        void release(AutoCloseable resource) throws Exception {
            synchronized (held) {
                held.remove(resource);
            }
            resource.close();
        }

        private void closeHeld() {
            List<AutoCloseable> resources;
            synchronized (held) {
                resources = new ArrayList<>(held);
                held.clear();
            }
            java.util.Collections.reverse(resources);
            for (AutoCloseable resource : resources) {
                try {
                    resource.close();
                } catch (Exception ignored) {
                    // the run is over; a member that fails to leave cleanly is what a crash looks like
                }
            }
        }

        String name(String suffix) {
            return prefix + "-" + suffix;
        }

        /** A group the judges compare, of {@code kind} consumer (classic and consumer groups), share or streams. */
        String group(String suffix, String kind) {
            String id = name(suffix);
            groups.add(id);
            groupKinds.put(id, kind);
            return id;
        }

        void note(String text) {
            synchronized (notes) {
                notes.add(text);
            }
        }

        String topic(String suffix, int partitions) throws Exception {
            String topic = name(suffix);
            try {
                admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(60, TimeUnit.SECONDS);
            } catch (java.util.concurrent.ExecutionException exists) {
                if (!(exists.getCause() instanceof TopicExistsException)) {
                    throw exists;
                }
            }
            return topic;
        }

        /** Writes {@code perPartition} records to each partition of {@code topic}. */
        void produce(String topic, int partitions, int perPartition) throws Exception {
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap))) {
                for (int p = 0; p < partitions; p++) {
                    for (int i = 0; i < perPartition; i++) {
                        byte[] key = ("k" + (i % 7)).getBytes(StandardCharsets.UTF_8);
                        producer.send(new ProducerRecord<>(topic, p, key, ("v" + i).getBytes(StandardCharsets.UTF_8)));
                    }
                }
                producer.flush();
            }
        }

        Properties consumer(String groupId, String protocol) {
            Properties props = clientProps(bootstrap);
            props.put("group.id", groupId);
            props.put("key.deserializer", ByteArrayDeserializer.class.getName());
            props.put("value.deserializer", ByteArrayDeserializer.class.getName());
            props.put("enable.auto.commit", "false");
            props.put("auto.offset.reset", "earliest");
            props.put("max.poll.records", "50");
            props.put("group.protocol", protocol);
            if (protocol.equals("classic")) {
                props.put("session.timeout.ms", "2000");
                props.put("heartbeat.interval.ms", "300");
                props.put("max.poll.interval.ms", "20000");
            }
            return props;
        }

        /** Waits until the group is STABLE with {@code members} members (Kafka's own view, by the admin
         *  client), and every given member owns its share of partitions. */
        void awaitStable(String groupId, int members, Collection<Member> owners, int partitions) {
            long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
            String last = "";
            while (System.nanoTime() < deadline) {
                try {
                    ConsumerGroupDescription description = admin.describeConsumerGroups(List.of(groupId))
                        .describedGroups().get(groupId).get(30, TimeUnit.SECONDS);
                    int owned = 0;
                    for (Member member : owners) {
                        owned += member.assignment().size();
                    }
                    @SuppressWarnings("deprecation")
                    ConsumerGroupState state = description.state();
                    boolean reconciled = description.members().stream().allMatch(
                        m -> m.targetAssignment().map(t -> t.topicPartitions().equals(m.assignment().topicPartitions())).orElse(true));
                    last = state + " members=" + description.members().size() + " owned=" + owned + " reconciled=" + reconciled;
                    if (state == ConsumerGroupState.STABLE && description.members().size() == members
                            && owned == partitions && reconciled) {
                        return;
                    }
                } catch (Exception retry) {
                    last = retry.toString();
                }
                sleep(100);
            }
            throw new IllegalStateException(groupId + " did not become stable: " + last);
        }

        /** Starts a member in a JVM of its own that the scenario can kill -9 once it owns partitions. */
        Process crashableMember(String groupId, String protocol, String topic) throws IOException {
            String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
            List<String> command = List.of(java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Dlog4j2.configurationFile=" + System.getProperty("log4j2.configurationFile", ""),
                "-cp", System.getProperty("java.class.path"), Scenarios.class.getName(),
                "member", bootstrap, groupId, protocol, topic);
            Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
            BufferedReader lines = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
            String line;
            while ((line = lines.readLine()) != null) {
                if (line.equals("ASSIGNED")) {
                    return process;
                }
            }
            throw new IllegalStateException("the member process for " + groupId + " ended before it was assigned");
        }

        /** kill -9 of a member process: no LeaveGroup is sent, the coordinator expires it after its session. */
        static void crash(Process process) throws InterruptedException {
            process.destroyForcibly();
            process.waitFor(30, TimeUnit.SECONDS);
        }
    }

    static void crashableMember(String bootstrap, String groupId, String protocol, String topic) throws Exception {
        Context context = new Context("member", bootstrap, groupId, null, new CountDownLatch(1), null);
        try (KafkaConsumerLoop loop = new KafkaConsumerLoop(context.consumer(groupId, protocol), topic)) {
            loop.run();
        }
    }

    /** The crashable member's poll loop (in a process of its own). */
    private static final class KafkaConsumerLoop implements AutoCloseable {
        private final org.apache.kafka.clients.consumer.KafkaConsumer<byte[], byte[]> consumer;

        KafkaConsumerLoop(Properties props, String topic) {
            consumer = new org.apache.kafka.clients.consumer.KafkaConsumer<>(props);
            consumer.subscribe(List.of(topic));
        }

        void run() {
            boolean announced = false;
            while (true) {
                int count = consumer.poll(Duration.ofMillis(100)).count();
                if (count > 0) {
                    consumer.commitSync();
                }
                if (!announced && !consumer.assignment().isEmpty() && count == 0) {
                    consumer.commitSync();
                    System.out.println("ASSIGNED");
                    System.out.flush();
                    announced = true;
                }
            }
        }

        @Override
        public void close() {
            consumer.close();
        }
    }

    static Properties clientProps(String bootstrap) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("request.timeout.ms", "30000");
        props.put("default.api.timeout.ms", "60000");
        props.put("metadata.max.age.ms", "1000");
        return props;
    }

    static Properties producerProps(String bootstrap) {
        Properties props = clientProps(bootstrap);
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        props.put("acks", "all");
        props.put("linger.ms", "0");
        return props;
    }

    static Set<TopicPartition> partitions(String topic, int count) {
        Set<TopicPartition> out = new java.util.HashSet<>();
        for (int p = 0; p < count; p++) {
            out.add(new TopicPartition(topic, p));
        }
        return out;
    }

    static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(interrupted);
        }
    }

    private static void writeReport(Path path, Collection<Context> contexts) throws IOException {
        StringBuilder json = new StringBuilder("{\n");
        boolean first = true;
        for (Context context : contexts) {
            if (!first) {
                json.append(",\n");
            }
            first = false;
            json.append("  ").append(quote(context.scenario)).append(": {\"status\": ").append(quote(context.status))
                .append(", \"error\": ").append(context.error == null ? "null" : quote(context.error))
                .append(", \"groups\": {")
                .append(context.groups.stream().map(g -> quote(g) + ": " + quote(context.groupKinds.get(g)))
                    .collect(Collectors.joining(", ")))
                .append("}, \"notes\": [")
                .append(context.notes.stream().map(Scenarios::quote).collect(Collectors.joining(", ")))
                .append("]}");
        }
        json.append("\n}\n");
        Files.write(path, json.toString().getBytes(StandardCharsets.UTF_8));
    }

    static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
