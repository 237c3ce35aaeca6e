package dev.dcs.flinkconnector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.doris.flink.cfg.DorisExecutionOptions;
import org.apache.doris.flink.cfg.DorisOptions;
import org.apache.doris.flink.cfg.DorisReadOptions;
import org.apache.doris.flink.sink.DorisSink;
import org.apache.doris.flink.sink.writer.serializer.SimpleStringSerializer;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

import java.io.File;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The connector's exactly-once sink (Stream Load with two-phase commit, one load per checkpoint)
 * writing into doris-emu: what becomes visible, what is aborted, and which labels may be reused.
 */
class StreamLoadSinkTest {
    private static final String TABLE = "sink_db.events";
    private DorisEmu emu;

    @BeforeEach
    void start(TestInfo info) throws Exception {
        emu = DorisEmu.start(new File("target/doris-emu-" + info.getTestMethod().get().getName() + ".log"));
        emu.sql("information_schema", "CREATE DATABASE sink_db");
        // DUPLICATE KEY: a row loaded twice is counted twice, so exactly-once is checkable.
        emu.sql(
                "sink_db",
                "CREATE TABLE " + TABLE + " (id BIGINT NOT NULL, payload VARCHAR(64)) DUPLICATE KEY(id) "
                        + "DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\")");
    }

    @AfterEach
    void stop() throws Exception {
        emu.close();
    }

    private static String payload(long id) {
        return "event " + id;
    }

    /** Fails once: in its snapshot of checkpoint 2, after the sink pre-committed that checkpoint's load. */
    static final class FailOnSecondCheckpoint extends RichMapFunction<String, String>
            implements CheckpointedFunction {
        static final AtomicBoolean FAILED = new AtomicBoolean();

        @Override
        public String map(String value) {
            return value;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) {
            if (context.getCheckpointId() == 2 && FAILED.compareAndSet(false, true)) {
                throw new IllegalStateException("injected failure in checkpoint 2");
            }
        }

        @Override
        public void initializeState(FunctionInitializationContext context) {}
    }

    private void runJob(String labelPrefix, long rows, boolean failOnce, int restarts) throws Exception {
        try {
            startJob(labelPrefix, rows, failOnce, restarts).getJobExecutionResult().get();
        } catch (java.util.concurrent.ExecutionException e) {
            throw (Exception) e.getCause();
        }
    }

    private JobClient startJob(String labelPrefix, long rows, boolean failOnce, int restarts) throws Exception {
        Configuration conf = new Configuration();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, restarts > 0 ? "fixed-delay" : "none");
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, restarts);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofMillis(200));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        env.enableCheckpointing(300);
        DataGeneratorSource<String> source =
                new DataGeneratorSource<>(
                        i -> "{\"id\":" + i + ",\"payload\":\"" + payload(i) + "\"}",
                        rows,
                        RateLimiterStrategy.perSecond(2000),
                        Types.STRING);
        Properties load = new Properties();
        load.setProperty("format", "json");
        load.setProperty("read_json_by_line", "true");
        DorisSink<String> sink =
                DorisSink.<String>builder()
                        .setDorisOptions(
                                DorisOptions.builder()
                                        .setFenodes(emu.fenodes())
                                        .setTableIdentifier(TABLE)
                                        .setUsername(DorisEmu.USER)
                                        .setPassword("")
                                        .build())
                        .setDorisReadOptions(DorisReadOptions.builder().build())
                        .setDorisExecutionOptions(
                                DorisExecutionOptions.builder()
                                        .setLabelPrefix(labelPrefix)
                                        .enable2PC()
                                        .setDeletable(false)
                                        .setStreamLoadProp(load)
                                        .build())
                        .setSerializer(new SimpleStringSerializer())
                        .build();
        DataStream<String> stream = env.fromSource(source, WatermarkStrategy.noWatermarks(), "events");
        if (failOnce) {
            stream = stream.map(new FailOnSecondCheckpoint());
        }
        stream.sinkTo(sink);
        return env.executeAsync("doris-sink-" + labelPrefix);
    }

    private void assertExactlyOnce(long rows) {
        List<List<String>> got = emu.rows("sink_db", "SELECT id, payload FROM " + TABLE);
        assertEquals(rows, got.size(), "rows in the sink");
        Set<Long> ids = new HashSet<>();
        for (List<String> r : got) {
            long id = Long.parseLong(r.get(0));
            assertTrue(ids.add(id), "id " + id + " loaded twice");
            assertEquals(payload(id), r.get(1));
        }
        for (long id = 0; id < rows; id++) {
            assertTrue(ids.contains(id), "id " + id + " missing");
        }
    }

    /** label → state of every transaction whose label starts with the prefix. */
    private List<String> txnStates(String labelPrefix) {
        List<String> states = new ArrayList<>();
        for (JsonNode t : emu.txns()) {
            if (t.path("label").asText().startsWith(labelPrefix + "_")) {
                states.add(t.path("label").asText() + "=" + t.path("state").asText());
            }
        }
        return states;
    }

    @Test
    void everyCheckpointsLoadIsCommittedAndVisibleOnce() throws Exception {
        runJob("ok", 3000, false, 0);
        assertExactlyOnce(3000);
        List<String> states = txnStates("ok");
        // The start-up probe (an empty load under checkpoint 1's label, aborted at once), then one
        // load per checkpoint under `<prefix>_<db>_<table>_<subtask>_<checkpoint>`, each committed.
        assertEquals("ok_sink_db_events_0_1=ABORTED", states.get(0), states.toString());
        for (int i = 1; i < states.size(); i++) {
            assertEquals("ok_sink_db_events_0_" + i + "=VISIBLE", states.get(i), states.toString());
        }
        assertTrue(states.size() >= 3, "a load per checkpoint: " + states);
    }

    @Test
    void aFailureAfterPreCommitAbortsTheLoadAndTheRestartLoadsEachRowOnce() throws Exception {
        FailOnSecondCheckpoint.FAILED.set(false);
        runJob("fo", 3000, true, 1);
        assertTrue(FailOnSecondCheckpoint.FAILED.get());
        assertExactlyOnce(3000);
        List<String> states = txnStates("fo");
        // Nothing is left pre-committed or running, and checkpoint 2's first load never became
        // visible: after the restart from checkpoint 1 the writer aborted it by its label.
        for (String s : states) {
            assertTrue(s.endsWith("=VISIBLE") || s.endsWith("=ABORTED"), states.toString());
        }
        assertTrue(states.contains("fo_sink_db_events_0_2=ABORTED"), states.toString());
        assertTrue(states.contains("fo_sink_db_events_0_2=VISIBLE"), states.toString());
    }

    @Test
    void aFailedStreamLoadFailsTheCheckpointAndTheRestartLoadsEachRowOnce() throws Exception {
        JobClient job = startJob("sl", 4000, false, 2);
        // Once a checkpoint's load is visible, the BE refuses the next load it is sent: the
        // writer's pre-commit of that checkpoint sees `Fail`, the job restarts from the last
        // completed checkpoint, and no row is lost or doubled.
        while (txnStates("sl").stream().noneMatch(s -> s.endsWith("=VISIBLE"))) {
            Thread.sleep(20);
        }
        emu.faults("{\"stream_load\":{\"count\":1,\"status\":\"Fail\",\"message\":\"injected\"}}");
        job.getJobExecutionResult().get();
        assertTrue(emu.faultState().path("stream_load").isNull(), "the fault was taken: " + emu.faultState());
        assertExactlyOnce(4000);
        for (String s : txnStates("sl")) {
            assertTrue(s.endsWith("=VISIBLE") || s.endsWith("=ABORTED"), s);
        }
    }

    @Test
    void aFinishedLabelIsNotReusedByANewJob() throws Exception {
        runJob("re", 500, false, 0);
        assertExactlyOnce(500);
        Exception e = assertThrows(Exception.class, () -> runJob("re", 500, false, 0));
        String causes = causeChain(e);
        assertTrue(
                causes.contains(
                        "Load status is Label Already Exists and load job finished, change you label prefix or restore from latest savepoint!"),
                causes);
        assertExactlyOnce(500);
    }

    private static String causeChain(Throwable t) {
        StringBuilder b = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            b.append(c).append('\n');
        }
        return b.toString();
    }
}
