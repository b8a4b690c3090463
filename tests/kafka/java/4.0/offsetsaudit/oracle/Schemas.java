package offsetsaudit.oracle;

import java.io.PrintStream;

final class Schemas {
    private Schemas() { }

    static void main(String[] args, PrintStream out) throws Exception {
        throw new UnsupportedOperationException("schemas: not yet");
    }
}
