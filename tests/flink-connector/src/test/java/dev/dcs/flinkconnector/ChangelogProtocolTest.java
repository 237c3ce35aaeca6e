package dev.dcs.flinkconnector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dcs.flinkconnector.ChangelogClient.Change;
import org.apache.doris.shaded.org.apache.arrow.adbc.core.AdbcException;
import org.apache.doris.shaded.org.apache.arrow.adbc.core.AdbcStatusCode;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

import java.io.File;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.List;

/**
 * The changelog read of the connector's master branch (no release carries it yet), replayed by
 * {@link ChangelogClient} against doris-emu: the current timestamp, `initial` mode into `@incr`
 * windows of each increment type, the offset table, and the visible-wait errors and their retry.
 */
class ChangelogProtocolTest {
    private static final DateTimeFormatter SECONDS =
            DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss").withZone(ZoneOffset.UTC);
    private DorisEmu emu;
    private ChangelogClient client;

    @BeforeEach
    void start(TestInfo info) throws Exception {
        emu = DorisEmu.start(new File("target/doris-emu-" + info.getTestMethod().get().getName() + ".log"));
        client = new ChangelogClient(emu.fenodes(), emu.feFlightPort, DorisEmu.USER, "");
        emu.sql("information_schema", "CREATE DATABASE cdc");
        emu.sql("cdc", Students.createTable("cdc.student", "UNIQUE KEY(id)", 4));
    }

    @AfterEach
    void stop() throws Exception {
        emu.close();
    }

    private void second() {
        emu.advanceClock(1000);
    }

    private void upsert(int id, int version) {
        emu.sql("cdc", "INSERT INTO cdc.student VALUES " + Students.sqlValues(Students.row(id, version)));
    }

    private void delete(int id) {
        emu.sql("cdc", "DELETE FROM cdc.student WHERE id = " + id);
    }

    /** op, id, name: enough to tell which version of which row a change carries. */
    private static List<String> summary(List<Change> changes) {
        List<String> out = new ArrayList<>();
        for (Change c : changes) {
            out.add(c.op() + " " + c.values().get(0) + " " + c.values().get(1));
        }
        return out;
    }

    private static String name(int id, int version) {
        return String.valueOf(Students.row(id, version).get(1));
    }

    /** The connector's current timestamp lies between the FE clock read before and after it. */
    private void assertCurrentTimestampFollowsTheClock() {
        String before = SECONDS.format(Instant.ofEpochMilli(emu.clock().path("now_ms").asLong()));
        String ts = client.currentTimestamp();
        String after = SECONDS.format(Instant.ofEpochMilli(emu.clock().path("now_ms").asLong()));
        assertTrue(before.compareTo(ts) <= 0 && ts.compareTo(after) <= 0, before + " <= " + ts + " <= " + after);
    }

    @Test
    void theCurrentTimestampIsTheFesClockFlooredToTheSecondInUtc() {
        assertCurrentTimestampFollowsTheClock();
        String earlier = client.currentTimestamp();
        emu.advanceClock(3600_000);
        assertCurrentTimestampFollowsTheClock();
        String hourLater = SECONDS.format(Instant.parse(earlier.replace(' ', 'T') + "Z").plusSeconds(3600));
        assertTrue(client.currentTimestamp().compareTo(hourLater) >= 0, earlier + " + 1 h");
    }

    @Test
    void initialModeReadsEachIncrementTypeOfTheChangesAfterTheStart() throws Exception {
        Students.insert(emu, "cdc.student", 1, 5, 0);
        second();
        // `initial`: the start is resolved before the snapshot; the changes after it are read in
        // windows [start, end) of whole seconds.
        String t0 = client.currentTimestamp();
        upsert(6, 0); // a new key
        upsert(2, 1); // an update
        delete(3); // a delete
        upsert(7, 0); // a key inserted and deleted in the window
        delete(7);
        second();
        String t1 = client.currentTimestamp();
        upsert(4, 1); // two updates of one key, in the next window
        upsert(4, 2);
        second();
        String t2 = client.currentTimestamp();

        List<Change> detail = client.readWindow("cdc", "student", t0, t2, "DETAIL");
        assertEquals(
                List.of(
                        "0 6 " + name(6, 0),
                        "2 2 " + name(2, 0), "3 2 " + name(2, 1),
                        "1 3 " + name(3, 0),
                        "0 7 " + name(7, 0), "1 7 " + name(7, 0),
                        "2 4 " + name(4, 0), "3 4 " + name(4, 1),
                        "2 4 " + name(4, 1), "3 4 " + name(4, 2)),
                summary(detail));
        // Ordered by TSO, LSN, OP, as the connector asks; every column is read.
        List<Change> sorted = new ArrayList<>(detail);
        sorted.sort(Comparator.comparingLong(Change::tso).thenComparingLong(Change::lsn).thenComparingLong(Change::op));
        assertEquals(detail, sorted);
        assertEquals(Students.COLUMNS.split(", ").length, detail.get(0).values().size());

        // Chained windows [t0, t1) + [t1, t2) read exactly the changes of [t0, t2).
        List<Change> chained = new ArrayList<>(client.readWindow("cdc", "student", t0, t1, "DETAIL"));
        chained.addAll(client.readWindow("cdc", "student", t1, t2, "DETAIL"));
        assertEquals(summary(detail), summary(chained));

        List<String> minDelta = summary(client.readWindow("cdc", "student", t0, t2, "MIN_DELTA"));
        minDelta.sort(Comparator.naturalOrder());
        assertEquals(
                List.of(
                        "0 6 " + name(6, 0),
                        "1 3 " + name(3, 0),
                        "2 2 " + name(2, 0), "2 4 " + name(4, 0),
                        "3 2 " + name(2, 1), "3 4 " + name(4, 2)),
                minDelta);

        assertEquals(
                List.of("0 6 " + name(6, 0), "0 7 " + name(7, 0)),
                summary(client.readWindow("cdc", "student", t0, t2, "APPEND_ONLY")));

        // A window with nothing committed in it, and an empty one (start == end) read nothing.
        second();
        String t3 = client.currentTimestamp();
        assertEquals(List.of(), client.readWindow("cdc", "student", t2, t3, "DETAIL"));
        assertEquals(List.of(), client.readWindow("cdc", "student", t3, t3, "DETAIL"));
    }

    @Test
    void theOffsetTableHoldsOneRowPerConsumerWithTheLatestOffset() throws Exception {
        emu.sql("cdc", "CREATE TABLE cdc.offsets (consumer_id VARCHAR(256) NOT NULL, "
                + "offset_timestamp DATETIME NOT NULL, update_time DATETIMEV2(3) NOT NULL) "
                + "UNIQUE KEY(consumer_id) DISTRIBUTED BY HASH(consumer_id) BUCKETS 1 "
                + "PROPERTIES (\"replication_num\" = \"1\")");
        ChangelogClient.publishOffset(emu.jdbcUrl(), DorisEmu.USER, "", "cdc.offsets", "job-a", "2026-03-01 10:00:00");
        ChangelogClient.publishOffset(emu.jdbcUrl(), DorisEmu.USER, "", "cdc.offsets", "job-b", "2026-03-01 10:00:05");
        ChangelogClient.publishOffset(emu.jdbcUrl(), DorisEmu.USER, "", "cdc.offsets", "job-a", "2026-03-01 10:00:10");
        List<List<String>> rows = emu.rows("cdc",
                "SELECT consumer_id, offset_timestamp, update_time FROM cdc.offsets ORDER BY consumer_id");
        assertEquals(2, rows.size(), rows.toString());
        assertEquals(List.of("job-a", "2026-03-01 10:00:10"), rows.get(0).subList(0, 2));
        assertEquals(List.of("job-b", "2026-03-01 10:00:05"), rows.get(1).subList(0, 2));
        // CURRENT_TIMESTAMP(3) into DATETIMEV2(3): milliseconds.
        assertTrue(rows.get(0).get(2).matches("\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}\\.\\d{3}"), rows.toString());
    }

    private static AdbcException readFails(ChangelogClient client, String start, String end) {
        return assertThrows(AdbcException.class, () -> client.readWindow("cdc", "student", start, end, "DETAIL"));
    }

    @Test
    void aWindowThatIsNotReadyFailsWithTheTypedErrorAndTheSameWindowReadsOnRetry() throws Exception {
        String t0 = client.currentTimestamp();
        upsert(1, 0);
        second();
        String t1 = client.currentTimestamp();
        for (int code : new int[] {5100, 5101}) {
            emu.faults("{\"incr_error\":{\"code\":" + code + ",\"count\":1}}");
            AdbcException e = readFails(client, t0, t1);
            // Flight UNAVAILABLE reaches ADBC as IO; the message names the Doris error.
            assertEquals(AdbcStatusCode.IO, e.getStatus(), e.toString());
            String name = code == 5100 ? "ERR_INCR_WINDOW_NOT_READY" : "ERR_INCR_VISIBLE_WAIT_TIMEOUT";
            assertTrue(e.getMessage().contains(name), e.getMessage());
            assertEquals(List.of("0 1 " + name(1, 0)), summary(client.readWindow("cdc", "student", t0, t1, "DETAIL")));
        }
    }

    @Test
    void aPreCommittedLoadHoldsTheWindowUntilItIsCommittedAndLandsInTheWindowOfItsCommit() throws Exception {
        String t0 = client.currentTimestamp();
        upsert(1, 0);
        HttpClient http = HttpClient.newHttpClient();
        String auth = "Basic " + Base64.getEncoder().encodeToString("root:".getBytes());
        String row = Students.sqlValues(Students.row(2, 0));
        HttpResponse<String> load = http.send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + emu.beHttpPort + "/api/cdc/student/_stream_load"))
                        .header("Authorization", auth).header("label", "held").header("two_phase_commit", "true")
                        .header("format", "json").header("columns", "id, name")
                        .PUT(HttpRequest.BodyPublishers.ofString("{\"id\":2,\"name\":\"held\"}"))
                        .build(),
                HttpResponse.BodyHandlers.ofString());
        assertTrue(load.body().contains("\"Status\": \"Success\""), load.body());
        second();
        String t1 = client.currentTimestamp();
        // The connector's session keeps the default change_visible_timeout_ms (5 s in doris-emu).
        AdbcException e = readFails(client, t0, t1);
        assertTrue(e.getMessage().contains("ERR_INCR_VISIBLE_WAIT_TIMEOUT: reason=VISIBLE_WAIT_TIMEOUT"), e.getMessage());
        HttpResponse<String> commit = http.send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + emu.beHttpPort + "/api/cdc/_stream_load_2pc"))
                        .header("Authorization", auth).header("label", "held").header("txn_operation", "commit")
                        .PUT(HttpRequest.BodyPublishers.noBody()).build(),
                HttpResponse.BodyHandlers.ofString());
        assertTrue(commit.body().contains("Success"), commit.body());
        // Retrying the same window now succeeds; the load committed after t1 is in the next one.
        assertEquals(List.of("0 1 " + name(1, 0)), summary(client.readWindow("cdc", "student", t0, t1, "DETAIL")));
        second();
        String t2 = client.currentTimestamp();
        assertEquals(List.of("0 2 held"), summary(client.readWindow("cdc", "student", t1, t2, "DETAIL")));
        assertTrue(row.length() > 0);
    }
}
