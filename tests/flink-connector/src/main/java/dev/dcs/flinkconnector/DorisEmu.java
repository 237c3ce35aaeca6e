package dev.dcs.flinkconnector;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A dcs-doris-emu process on free ports: its ports, SQL through the FE statement API, and the
 * {@code /_emu} control API (clock, faults, transactions).
 */
public final class DorisEmu implements AutoCloseable {
    /** The account the emulator starts with. */
    public static final String USER = "root";

    private static final ObjectMapper JSON = new ObjectMapper();
    private final Process process;
    private final HttpClient http =
            HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
    /** FE HTTP port (Stream Load entry, statement API, control API). */
    public final int feHttpPort;
    /** BE HTTP port. */
    public final int beHttpPort;
    /** MySQL protocol port. */
    public final int queryPort;
    /** FE Arrow Flight SQL port. */
    public final int feFlightPort;

    private DorisEmu(Process process, JsonNode ports) {
        this.process = process;
        this.feHttpPort = ports.path("fe_http_port").asInt();
        this.beHttpPort = ports.path("be_http_port").asInt();
        this.queryPort = ports.path("query_port").asInt();
        this.feFlightPort = ports.path("fe_flight_port").asInt();
    }

    /**
     * Start the binary named by the system property {@code dorisEmu.bin} (or the environment
     * variable {@code DORIS_EMU_BIN}); its log goes to {@code log}.
     */
    public static DorisEmu start(File log) throws IOException {
        String bin = System.getProperty("dorisEmu.bin");
        if (bin == null || bin.isBlank()) {
            bin = System.getenv("DORIS_EMU_BIN");
        }
        if (bin == null || bin.isBlank() || !new File(bin).canExecute()) {
            throw new IllegalStateException(
                    "set -DdorisEmu.bin (or DORIS_EMU_BIN) to the dcs-doris-emu binary, got " + bin);
        }
        log.getParentFile().mkdirs();
        Process p =
                new ProcessBuilder(
                                bin,
                                "--fe-http-port", "0",
                                "--be-http-port", "0",
                                "--query-port", "0",
                                "--fe-flight-port", "0",
                                "--be-flight-port", "0")
                        .redirectError(ProcessBuilder.Redirect.appendTo(log))
                        .start();
        BufferedReader out =
                new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        String line = out.readLine();
        if (line == null) {
            p.destroyForcibly();
            throw new IOException("dcs-doris-emu exited before printing its ports; see " + log);
        }
        return new DorisEmu(p, JSON.readTree(line));
    }

    /** The process id, for RSS and CPU sampling. */
    public long pid() {
        return process.pid();
    }

    /** {@code host:port} of the FE HTTP port, as the connector's {@code fenodes} takes it. */
    public String fenodes() {
        return "127.0.0.1:" + feHttpPort;
    }

    /** A MySQL JDBC URL of the query port. */
    public String jdbcUrl() {
        return "jdbc:mysql://127.0.0.1:" + queryPort;
    }

    private String basicAuth() {
        return "Basic "
                + Base64.getEncoder().encodeToString((USER + ":").getBytes(StandardCharsets.UTF_8));
    }

    private JsonNode send(HttpRequest.Builder request) {
        try {
            HttpResponse<String> r =
                    http.send(
                            request.timeout(Duration.ofSeconds(120)).build(),
                            HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) {
                throw new IllegalStateException(
                        "doris-emu answered HTTP " + r.statusCode() + ": " + r.body());
            }
            return JSON.readTree(r.body());
        } catch (IOException e) {
            throw new IllegalStateException("doris-emu request failed", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private HttpRequest.Builder fe(String path) {
        return HttpRequest.newBuilder(URI.create("http://" + fenodes() + path));
    }

    /**
     * Run one statement in {@code db} through the FE statement API; the {@code data} of the
     * answer. A failed statement throws with Doris's message.
     */
    public JsonNode sql(String db, String stmt) {
        ObjectNode body = JSON.createObjectNode().put("stmt", stmt).put("limit", 100_000_000);
        JsonNode r =
                send(
                        fe("/api/query/default_cluster/" + db)
                                .header("Authorization", basicAuth())
                                .header("Content-Type", "application/json")
                                .POST(HttpRequest.BodyPublishers.ofString(body.toString())));
        if (r.path("code").asInt(-1) != 0) {
            throw new IllegalStateException("statement failed: " + stmt + ": " + r.path("data"));
        }
        return r.path("data");
    }

    /** The rows of a query, every cell as the statement API's JSON text (null for NULL). */
    public List<List<String>> rows(String db, String query) {
        List<List<String>> rows = new ArrayList<>();
        for (JsonNode row : sql(db, query).path("data")) {
            List<String> cells = new ArrayList<>();
            for (JsonNode cell : row) {
                cells.add(cell.isNull() ? null : cell.asText());
            }
            rows.add(cells);
        }
        return rows;
    }

    /** {@code SELECT COUNT(*)} of a table. */
    public long count(String table) {
        return Long.parseLong(rows("information_schema", "SELECT COUNT(*) FROM " + table).get(0).get(0));
    }

    /** {@code GET /_emu/txns}: every Stream Load transaction the BE began. */
    public JsonNode txns() {
        return send(fe("/_emu/txns").GET());
    }

    /** {@code PUT /_emu/faults} with a {@code FaultState} JSON document. */
    public JsonNode faults(String faultState) {
        return send(
                fe("/_emu/faults")
                        .header("Content-Type", "application/json")
                        .PUT(HttpRequest.BodyPublishers.ofString(faultState)));
    }

    /** {@code GET /_emu/faults}: the armed faults. */
    public JsonNode faultState() {
        return send(fe("/_emu/faults").GET());
    }

    /** {@code GET /_emu/counters}: requests per endpoint since the last reset. */
    public JsonNode counters() {
        return send(fe("/_emu/counters").GET());
    }

    /** {@code DELETE /_emu/counters}. */
    public void resetCounters() {
        send(fe("/_emu/counters").DELETE());
    }

    /** {@code GET /_emu/clock}. */
    public JsonNode clock() {
        return send(fe("/_emu/clock").GET());
    }

    /** Move the emulated clock forward by {@code ms}. */
    public JsonNode advanceClock(long ms) {
        return send(
                fe("/_emu/clock/advance")
                        .header("Content-Type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofString("{\"ms\":" + ms + "}")));
    }

    @Override
    public void close() throws InterruptedException {
        process.destroy();
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor();
        }
    }
}
