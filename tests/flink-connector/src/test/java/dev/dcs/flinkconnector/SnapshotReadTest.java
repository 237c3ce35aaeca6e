package dev.dcs.flinkconnector;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.apache.doris.flink.cfg.DorisOptions;
import org.apache.doris.flink.cfg.DorisReadOptions;
import org.apache.doris.flink.deserialization.SimpleListDeserializationSchema;
import org.apache.doris.flink.source.DorisSource;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.CloseableIterator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.File;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/** The connector's bounded source (Arrow Flight SQL, one split per tablet) reads doris-emu's table. */
class SnapshotReadTest {
    private static final int ROWS = 20_000;
    private static DorisEmu emu;

    @BeforeAll
    static void start() throws Exception {
        emu = DorisEmu.start(new File("target/doris-emu-snapshot.log"));
        emu.sql("information_schema", "CREATE DATABASE demo");
        emu.sql("demo", Students.createTable("demo.student", "UNIQUE KEY(id)", 4));
        Students.insert(emu, "demo.student", 1, ROWS, 0);
    }

    @AfterAll
    static void stop() throws Exception {
        if (emu != null) {
            emu.close();
        }
    }

    private static List<List<?>> read(DorisReadOptions.Builder readOptions, int parallelism) throws Exception {
        DorisOptions options =
                DorisOptions.builder()
                        .setFenodes(emu.fenodes())
                        .setTableIdentifier("demo.student")
                        .setUsername(DorisEmu.USER)
                        .setPassword("")
                        .build();
        DorisSource<List<?>> source =
                DorisSource.<List<?>>builder()
                        .setDorisOptions(options)
                        .setDorisReadOptions(
                                readOptions.setUseFlightSql(true).setFlightSqlPort(emu.feFlightPort).build())
                        .setDeserializer(new SimpleListDeserializationSchema())
                        .build();
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(parallelism);
        List<List<?>> rows = new ArrayList<>();
        try (CloseableIterator<List<?>> it =
                env.fromSource(source, WatermarkStrategy.noWatermarks(), "doris-source").executeAndCollect()) {
            it.forEachRemaining(rows::add);
        }
        rows.sort(Comparator.comparing(r -> (Integer) r.get(0)));
        return rows;
    }

    @Test
    void everyRowOfEveryTabletIsReadWithItsValues() throws Exception {
        // One split per tablet (4 buckets), two readers.
        emu.resetCounters();
        List<List<?>> rows = read(DorisReadOptions.builder().setRequestTabletSize(1), 2);
        assertEquals(1, emu.counters().path("fe_query_plan").asInt(), emu.counters().toString());
        assertEquals(4, emu.counters().path("flight_do_get_be").asInt(), emu.counters().toString());
        assertEquals(ROWS, rows.size());
        for (int id = 1; id <= ROWS; id++) {
            assertEquals(Students.row(id, 0), rows.get(id - 1), "row " + id);
        }
    }

    @Test
    void projectionAndFilterArePushedIntoTheQuery() throws Exception {
        List<List<?>> rows =
                read(
                        DorisReadOptions.builder()
                                .setReadFields("id, name")
                                .setFilterQuery("id <= 100 AND age IS NOT NULL"),
                        1);
        List<List<?>> expected = new ArrayList<>();
        for (int id = 1; id <= 100; id++) {
            List<Object> r = Students.row(id, 0);
            if (r.get(2) != null) {
                expected.add(List.of(id, r.get(1) == null ? "\0null" : r.get(1)));
            }
        }
        List<List<?>> got = new ArrayList<>();
        for (List<?> r : rows) {
            got.add(List.of(r.get(0), r.get(1) == null ? "\0null" : r.get(1)));
        }
        assertEquals(expected, got);
    }
}
