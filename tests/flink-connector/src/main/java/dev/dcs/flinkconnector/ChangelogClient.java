package dev.dcs.flinkconnector;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.doris.shaded.org.apache.arrow.adbc.core.AdbcConnection;
import org.apache.doris.shaded.org.apache.arrow.adbc.core.AdbcDatabase;
import org.apache.doris.shaded.org.apache.arrow.adbc.core.AdbcDriver;
import org.apache.doris.shaded.org.apache.arrow.adbc.core.AdbcException;
import org.apache.doris.shaded.org.apache.arrow.adbc.core.AdbcStatement;
import org.apache.doris.shaded.org.apache.arrow.adbc.driver.flightsql.FlightSqlDriver;
import org.apache.doris.shaded.org.apache.arrow.flight.Location;
import org.apache.doris.shaded.org.apache.arrow.memory.RootAllocator;
import org.apache.doris.shaded.org.apache.arrow.vector.FieldVector;
import org.apache.doris.shaded.org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.doris.shaded.org.apache.arrow.vector.ipc.ArrowReader;
import org.apache.doris.shaded.org.apache.arrow.vector.util.Text;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * The changelog read of the Flink Doris connector's master branch (commit 1c10580d, "Support
 * incremental reads from Doris source"), which no release on Maven Central carries yet: the same
 * requests, in the same order, through the same client libraries (the connector's shaded ADBC
 * Flight SQL driver, HTTP with Basic auth, MySQL JDBC), with the same checks on the answers.
 * Each method names the connector code it follows.
 */
public final class ChangelogClient {
    /** The SQL comment the connector prefixes to every Flight query. */
    public static final String PREFIX = "/* ApplicationName=Flink ArrowFlightSQL Query */";
    private static final Pattern TIMESTAMP = Pattern.compile("\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}");
    private static final ObjectMapper JSON = new ObjectMapper();

    private final String fenodes;
    private final int flightPort;
    private final String user;
    private final String password;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

    /** A client of the FE at {@code fenodes} ({@code host:http_port}) and its Flight SQL port. */
    public ChangelogClient(String fenodes, int flightPort, String user, String password) {
        this.fenodes = fenodes;
        this.flightPort = flightPort;
        this.user = user;
        this.password = password;
    }

    /** One change read from an {@code @incr} window. */
    public record Change(long op, long tso, long lsn, List<Object> values) {}

    private String basic() {
        return "Basic "
                + Base64.getEncoder()
                        .encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8));
    }

    private JsonNode httpJson(HttpRequest request) {
        try {
            HttpResponse<String> r = http.send(request, HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) {
                throw new IllegalStateException("HTTP " + r.statusCode() + ": " + r.body());
            }
            return JSON.readTree(r.body());
        } catch (IOException e) {
            throw new IllegalStateException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /**
     * {@code RestService.resolveCurrentTimestamp}: {@code GET /api/tso}, then the FE formats the
     * physical time with {@code FROM_UNIXTIME} through the statement API; the value must match
     * {@code yyyy-MM-dd HH:mm:ss} exactly.
     */
    public String currentTimestamp() {
        JsonNode tso =
                httpJson(
                        HttpRequest.newBuilder(URI.create("http://" + fenodes + "/api/tso"))
                                .header("Authorization", basic())
                                .GET()
                                .build());
        if (tso.path("code").asInt(Integer.MIN_VALUE) != 0) {
            throw new IllegalStateException("Failed to get current Doris TSO: " + tso.path("msg").asText());
        }
        long physical = tso.path("data").path("current_tso_physical_time").asLong(-1);
        if (physical <= 0) {
            throw new IllegalStateException("Invalid current_tso_physical_time: " + tso);
        }
        String stmt = String.format("SELECT FROM_UNIXTIME(%d / 1000, '%%Y-%%m-%%d %%H:%%i:%%s')", physical);
        JsonNode r =
                httpJson(
                        HttpRequest.newBuilder(
                                        URI.create("http://" + fenodes + "/api/query/default_cluster/information_schema"))
                                .header("Authorization", basic())
                                .header("Content-Type", "application/json")
                                .POST(HttpRequest.BodyPublishers.ofString(
                                        JSON.createObjectNode().put("stmt", stmt).toString()))
                                .build());
        if (r.has("code") && r.path("code").asInt() != 0) {
            throw new IllegalStateException("Failed to execute Doris statement: " + r.path("msg").asText());
        }
        JsonNode data = r.path("data").path("data");
        if (data.size() != 1 || !data.get(0).isArray() || data.get(0).size() != 1 || data.get(0).get(0).isNull()) {
            throw new IllegalStateException("Doris scalar statement must return exactly one row and one column");
        }
        String ts = data.get(0).get(0).asText();
        if (!TIMESTAMP.matcher(ts).matches()) {
            throw new IllegalStateException("Doris timestamp must strictly match yyyy-MM-dd HH:mm:ss: " + ts);
        }
        return ts;
    }

    /** {@code DorisFlightValueReader.buildIncrementalSql}. */
    public static String incrementalSql(String db, String table, String start, String end, String type) {
        return PREFIX
                + " SELECT *, __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__ FROM `"
                + db + "`.`" + table + "`@incr('startTimestamp' = '" + start + "', 'endTimestamp' = '"
                + end + "', 'incrementType' = '" + type + "') ORDER BY __DORIS_BINLOG_TSO__, "
                + "__DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__";
    }

    /**
     * Read one stream split as {@code DorisFlightValueReader} does: a new ADBC Flight SQL
     * connection, the incremental SQL, every Arrow batch checked as {@code RowBatch} checks it
     * (the three hidden columns exactly once each, never null; the table's columns before them).
     *
     * @throws AdbcException as the connector would see it (a 5100/5101 answer, say)
     */
    public List<Change> readWindow(String db, String table, String start, String end, String type)
            throws AdbcException {
        Map<String, Object> params = new HashMap<>();
        AdbcDriver.PARAM_URI.set(params, Location.forGrpcInsecure(fenodes.split(":")[0], flightPort).getUri().toString());
        AdbcDriver.PARAM_USERNAME.set(params, user);
        AdbcDriver.PARAM_PASSWORD.set(params, password);
        List<Change> out = new ArrayList<>();
        try (RootAllocator allocator = new RootAllocator(Integer.MAX_VALUE);
                AdbcDatabase database = new FlightSqlDriver(allocator).open(params);
                AdbcConnection connection = database.connect();
                AdbcStatement statement = connection.createStatement()) {
            statement.setSqlQuery(incrementalSql(db, table, start, end, type));
            try (AdbcStatement.QueryResult result = statement.executeQuery();
                    ArrowReader reader = result.getReader()) {
                while (reader.loadNextBatch()) {
                    VectorSchemaRoot root = reader.getVectorSchemaRoot();
                    List<FieldVector> vectors = root.getFieldVectors();
                    int tso = -1, lsn = -1, op = -1;
                    for (int i = 0; i < vectors.size(); i++) {
                        String name = vectors.get(i).getName();
                        if (name.equalsIgnoreCase("__DORIS_BINLOG_TSO__")) {
                            tso = check(tso, i);
                        } else if (name.equalsIgnoreCase("__DORIS_BINLOG_LSN__")) {
                            lsn = check(lsn, i);
                        } else if (name.equalsIgnoreCase("__DORIS_BINLOG_OP__")) {
                            op = check(op, i);
                        }
                    }
                    if (tso < 0 || lsn < 0 || op < 0) {
                        throw new IllegalStateException(
                                "Doris incremental result must contain exactly one TSO, LSN, and OP field");
                    }
                    for (int row = 0; row < root.getRowCount(); row++) {
                        List<Object> values = new ArrayList<>();
                        for (int i = 0; i < vectors.size(); i++) {
                            if (i != tso && i != lsn && i != op) {
                                Object v = vectors.get(i).getObject(row);
                                values.add(v instanceof Text t ? t.toString() : v);
                            }
                        }
                        out.add(new Change(hidden(vectors.get(op), row), hidden(vectors.get(tso), row),
                                hidden(vectors.get(lsn), row), values));
                    }
                }
            }
        } catch (AdbcException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
        return out;
    }

    private static int check(int seen, int index) {
        if (seen >= 0) {
            throw new IllegalStateException("Doris incremental result must contain exactly one TSO, LSN, and OP field");
        }
        return index;
    }

    private static long hidden(FieldVector v, int row) {
        Object value = v.getObject(row);
        if (value == null) {
            throw new IllegalStateException("Doris row-binlog field " + v.getName() + " cannot be null");
        }
        return value instanceof Number n ? n.longValue() : Long.parseLong(value.toString());
    }

    /**
     * {@code DorisOffsetPublisher.publish}: the consumer's row, written over MySQL JDBC with a
     * prepared INSERT (an upsert on the UNIQUE KEY table); one row must be updated.
     */
    public static void publishOffset(String jdbcUrl, String user, String password, String offsetTable,
            String consumerId, String offset) throws SQLException {
        String[] parts = offsetTable.split("\\.", -1);
        String sql = "INSERT INTO `" + parts[0] + "`.`" + parts[1]
                + "` (`consumer_id`, `offset_timestamp`, `update_time`) VALUES (?, ?, CURRENT_TIMESTAMP(3))";
        try (Connection c = DriverManager.getConnection(jdbcUrl, user, password);
                PreparedStatement s = c.prepareStatement(sql)) {
            s.setString(1, consumerId);
            s.setString(2, offset);
            if (s.executeUpdate() <= 0) {
                throw new SQLException("Doris offset INSERT did not update a row");
            }
        }
    }
}
