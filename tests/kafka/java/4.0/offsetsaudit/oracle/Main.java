package offsetsaudit.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;

/**
 * The oracle's command line: Kafka's own group coordinator and assignors, driven from JSON.
 *
 * <pre>
 *   run SCENARIOS.jsonl OUT     play each scenario (one JSON object per line) through a GroupCoordinatorShard;
 *                               OUT/__consumer_offsets-P/00000000000000000000.log per scenario (P = its partition),
 *                               OUT/state/NAME.state.json and OUT/state/NAME.epochs.jsonl; one summary line per
 *                               scenario on stdout
 *   replay DIR [TOPICS.json] [--epochs] [--broker-configs CONFIGS.json]
 *                               load every __consumer_offsets-P folder of DIR into a fresh shard the way the
 *                               coordinator loads its partition (with the broker configs of {"P": {...}} or
 *                               {"*": {...}}); print each partition's state as a JSON line, with --epochs also
 *                               the loaded coordinator's view after every batch
 *   assign INPUTS.jsonl         run Kafka's server-side assignors on each input line; one result line each
 *   schemas                     every coordinator record type's key and value schemas as Kafka's generated classes
 *                               define them, as one JSON document
 *   golden [records ...] [segment ...]  what the release's own classes make of the golden codec data (see Golden)
 * </pre>
 */
public final class Main {
    static final ObjectMapper MAPPER = new ObjectMapper().disable(SerializationFeature.INDENT_OUTPUT);

    private Main() { }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) usage();
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, "UTF-8");
        // Standard output carries the oracle's JSON lines only: Kafka's own logging (log4j's default console
        // output, e.g. a classic group's failed rebalance at ERROR) goes to standard error instead.
        System.setOut(System.err);
        switch (args[0]) {
            case "run": run(args, out); break;
            case "replay": Replayer.main(args, out); break;
            case "assign": Assignors.main(args, out); break;
            case "schemas": Schemas.main(args, out); break;
            case "golden": Golden.main(args, out); break;
            case "version": out.println(Compat.KAFKA_LINE); break;
            default: usage();
        }
        out.flush();
    }

    private static void usage() {
        System.err.println("usage: offsetsaudit.oracle.Main run SCENARIOS.jsonl OUT | replay DIR [TOPICS.json] | "
            + "assign INPUTS.jsonl | schemas | golden [records ...] [segment ...] | version");
        System.exit(2);
    }

    static List<JsonNode> readLines(String path) throws IOException {
        List<JsonNode> out = new ArrayList<>();
        BufferedReader reader = path.equals("-")
            ? new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))
            : Files.newBufferedReader(new File(path).toPath(), StandardCharsets.UTF_8);
        try (BufferedReader r = reader) {
            String line;
            while ((line = r.readLine()) != null) {
                if (!line.trim().isEmpty()) out.add(MAPPER.readTree(line));
            }
        }
        return out;
    }

    static void writeJson(File file, JsonNode node) throws IOException {
        file.getParentFile().mkdirs();
        Files.write(file.toPath(), MAPPER.writeValueAsBytes(node));
    }

    private static void run(String[] args, PrintStream out) throws Exception {
        if (args.length < 3) usage();
        File root = new File(args[2]);
        for (JsonNode scenario : readLines(args[1])) {
            long started = System.nanoTime();
            Driver driver = new Driver(scenario);
            ObjectNode state = driver.run();
            int partition = driver.coordinator.partition;
            File segment = new File(root, "__consumer_offsets-" + partition + "/00000000000000000000.log");
            if (segment.exists()) throw new IllegalStateException(segment + " exists: give each scenario its own partition");
            SegmentLog.writeSegment(segment, driver.coordinator.batches);
            writeJson(new File(root, "state/" + driver.name + ".state.json"), state);
            File epochs = new File(root, "state/" + driver.name + ".epochs.jsonl");
            try (BufferedWriter w = new BufferedWriter(new OutputStreamWriter(Files.newOutputStream(epochs.toPath()), StandardCharsets.UTF_8))) {
                for (JsonNode line : driver.coordinator.epochs) {
                    w.write(MAPPER.writeValueAsString(line));
                    w.write('\n');
                }
            }
            ObjectNode summary = Coordinator.JSON.objectNode();
            summary.put("name", driver.name);
            summary.put("partition", partition);
            summary.put("records", driver.coordinator.records);
            summary.put("batches", driver.coordinator.batches.size());
            summary.put("last_offset", driver.coordinator.nextOffset - 1);
            summary.put("errors", driver.errors.size());
            summary.put("millis", (System.nanoTime() - started) / 1_000_000);
            ArrayNode e = summary.putArray("error_list");
            for (int i = 0; i < Math.min(5, driver.errors.size()); i++) e.add(driver.errors.get(i));
            out.println(MAPPER.writeValueAsString(summary));
        }
    }
}
