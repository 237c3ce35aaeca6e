package dev.dcs.flinkconnector;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.doris.flink.cfg.DorisExecutionOptions;
import org.apache.doris.flink.cfg.DorisOptions;
import org.apache.doris.flink.cfg.DorisReadOptions;
import org.apache.doris.flink.deserialization.SimpleListDeserializationSchema;
import org.apache.doris.flink.sink.DorisSink;
import org.apache.doris.flink.sink.writer.serializer.SimpleStringSerializer;
import org.apache.doris.flink.source.DorisSource;
import org.apache.doris.shaded.org.apache.arrow.adbc.core.AdbcException;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.source.SourceFunction;

import java.math.BigDecimal;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

/**
 * The Flink side of the race (BENCHMARKS.md): `initial` mode of a Doris table into a Doris sink
 * in one JVM (a MiniCluster, one TaskManager). The start is resolved first, then the snapshot
 * runs as a bounded job (the connector's Flight SQL source into its 2PC Stream Load sink), then
 * the changelog job polls `@incr` windows from that start, as the connector's master branch does
 * (its requests replayed by {@link ChangelogClient}; no release has the read), into the same sink.
 *
 * <p>Arguments: {@code fenodes flightPort sourceTable sinkTable pollMs checkpointMs}. Prints
 * {@code snapshot-done} when the snapshot job has finished; the changelog job runs until the
 * process is stopped.
 */
public final class RaceJob {
    private static final DateTimeFormatter DATETIME6 = DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss.SSSSSS");

    private RaceJob() {}

    /** The table's column names, in order. */
    static List<String> columns() {
        List<String> names = new ArrayList<>();
        for (String def : Students.COLUMNS.split(", ")) {
            names.add(def.substring(0, def.indexOf(' ')));
        }
        return names;
    }

    /** A row as the JSON line Stream Load takes, with the delete sign. */
    static String json(ObjectMapper mapper, List<String> names, List<?> values, boolean delete) {
        ObjectNode o = mapper.createObjectNode();
        for (int i = 0; i < names.size(); i++) {
            Object v = values.get(i);
            String n = names.get(i);
            if (v == null) {
                o.putNull(n);
            } else if (v instanceof LocalDateTime t) {
                o.put(n, DATETIME6.format(t));
            } else if (v instanceof BigDecimal d) {
                o.put(n, d.toPlainString());
            } else if (v instanceof Boolean b) {
                o.put(n, b);
            } else if (v instanceof Number x) {
                o.put(n, x.toString());
            } else {
                o.put(n, v.toString());
            }
        }
        o.put("__DORIS_DELETE_SIGN__", delete ? 1 : 0);
        return o.toString();
    }

    private static DorisSink<String> sink(String fenodes, String table, String labelPrefix) {
        Properties load = new Properties();
        load.setProperty("format", "json");
        load.setProperty("read_json_by_line", "true");
        load.setProperty("hidden_columns", "__DORIS_DELETE_SIGN__");
        return DorisSink.<String>builder()
                .setDorisOptions(DorisOptions.builder().setFenodes(fenodes).setTableIdentifier(table)
                        .setUsername(DorisEmu.USER).setPassword("").build())
                .setDorisReadOptions(DorisReadOptions.builder().build())
                .setDorisExecutionOptions(DorisExecutionOptions.builder().setLabelPrefix(labelPrefix)
                        .enable2PC().setDeletable(false).setStreamLoadProp(load).build())
                .setSerializer(new SimpleStringSerializer())
                .build();
    }

    private static StreamExecutionEnvironment env(long checkpointMs, int parallelism) {
        Configuration conf = new Configuration();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(parallelism);
        env.enableCheckpointing(checkpointMs);
        return env;
    }

    public static void main(String[] args) throws Exception {
        String fenodes = args[0];
        int flightPort = Integer.parseInt(args[1]);
        String source = args[2];
        String sinkTable = args[3];
        long pollMs = Long.parseLong(args[4]);
        long checkpointMs = Long.parseLong(args[5]);
        ChangelogClient client = new ChangelogClient(fenodes, flightPort, DorisEmu.USER, "");
        String start = client.currentTimestamp();
        List<String> names = columns();

        StreamExecutionEnvironment snap = env(checkpointMs, 2);
        DorisSource<List<?>> reader = DorisSource.<List<?>>builder()
                .setDorisOptions(DorisOptions.builder().setFenodes(fenodes).setTableIdentifier(source)
                        .setUsername(DorisEmu.USER).setPassword("").build())
                .setDorisReadOptions(DorisReadOptions.builder().setUseFlightSql(true)
                        .setFlightSqlPort(flightPort).setRequestTabletSize(1).build())
                .setDeserializer(new SimpleListDeserializationSchema())
                .build();
        snap.fromSource(reader, WatermarkStrategy.noWatermarks(), "snapshot")
                .map(row -> json(new ObjectMapper(), names, row, false))
                .returns(Types.STRING)
                .sinkTo(sink(fenodes, sinkTable, "race_snapshot"));
        snap.execute("race-snapshot");
        System.out.println("snapshot-done");
        System.out.flush();

        // Stream splits go to subtask 0 only in the connector: one reader.
        StreamExecutionEnvironment cdc = env(checkpointMs, 1);
        String[] t = source.split("\\.");
        cdc.addSource(new WindowSource(fenodes, flightPort, t[0], t[1], start, pollMs), "changelog")
                .returns(Types.STRING)
                .sinkTo(sink(fenodes, sinkTable, "race_changelog"));
        cdc.execute("race-changelog");
    }

    /**
     * Polls `@incr` DETAIL windows [start, now) every poll interval; retries a failed window after
     * a second (the documented visible-wait contract); the start is checkpointed. UPDATE_BEFORE is
     * dropped, as the connector's sink does by default ({@code sink.ignore.update-before}).
     */
    static final class WindowSource implements SourceFunction<String>, CheckpointedFunction {
        private final String fenodes;
        private final int flightPort;
        private final String db;
        private final String table;
        private final long pollMs;
        private volatile String start;
        private volatile boolean running = true;
        private transient ListState<String> state;

        WindowSource(String fenodes, int flightPort, String db, String table, String start, long pollMs) {
            this.fenodes = fenodes;
            this.flightPort = flightPort;
            this.db = db;
            this.table = table;
            this.start = start;
            this.pollMs = pollMs;
        }

        @Override
        public void run(SourceContext<String> ctx) throws Exception {
            ChangelogClient client = new ChangelogClient(fenodes, flightPort, DorisEmu.USER, "");
            ObjectMapper mapper = new ObjectMapper();
            List<String> names = columns();
            while (running) {
                Thread.sleep(pollMs);
                String end = client.currentTimestamp();
                if (end.compareTo(start) <= 0) {
                    continue;
                }
                List<ChangelogClient.Change> changes;
                try {
                    changes = client.readWindow(db, table, start, end, "DETAIL");
                } catch (AdbcException e) {
                    Thread.sleep(1000);
                    continue;
                }
                synchronized (ctx.getCheckpointLock()) {
                    for (ChangelogClient.Change c : changes) {
                        if (c.op() != 2) {
                            ctx.collect(json(mapper, names, normalize(c.values()), c.op() == 1));
                        }
                    }
                    start = end;
                }
            }
        }

        /** Arrow's DATE (days) and DATETIME (LocalDateTime) as the snapshot reader gives them. */
        private static List<Object> normalize(List<Object> values) {
            List<Object> out = new ArrayList<>(values);
            Object birthday = out.get(6);
            if (birthday instanceof Integer days) {
                out.set(6, java.time.LocalDate.ofEpochDay(days));
            }
            return out;
        }

        @Override
        public void cancel() {
            running = false;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            state.update(List.of(start));
        }

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            state = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("start", String.class));
            for (String s : state.get()) {
                start = s;
            }
        }
    }
}
