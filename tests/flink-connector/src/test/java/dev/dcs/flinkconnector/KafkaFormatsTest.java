package dev.dcs.flinkconnector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.flink.api.common.serialization.DeserializationSchema;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.formats.json.JsonFormatFactory;
import org.apache.flink.formats.json.canal.CanalJsonFormatFactory;
import org.apache.flink.formats.json.debezium.DebeziumJsonFormatFactory;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.groups.UnregisteredMetricsGroup;
import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.connector.format.DecodingFormat;
import org.apache.flink.table.connector.source.DynamicTableSource;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.runtime.typeutils.InternalTypeInfo;
import org.apache.flink.table.types.DataType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.types.RowKind;
import org.apache.flink.util.Collector;
import org.apache.flink.util.SimpleUserCodeClassLoader;
import org.apache.flink.util.UserCodeClassLoader;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Flink's own formats read the records dcs's Kafka encoder writes: the vectors in
 * runner/tests/vectors/kafka (the encoder's unit test keeps them equal to what it writes) go
 * through flink-json's {@code debezium-json}, {@code canal-json} and {@code json} formats, built by
 * their format factories as the Kafka connectors build them. Each topic read back gives the same
 * changes in the same order, and applied in order the source table's last state.
 */
class KafkaFormatsTest {
    private static final Path VECTORS = Path.of("..", "..", "runner", "tests", "vectors", "kafka");

    /** shop.orders as Flink declares it. */
    private static final DataType ORDERS =
            DataTypes.ROW(
                    DataTypes.FIELD("id", DataTypes.INT().notNull()),
                    DataTypes.FIELD("name", DataTypes.STRING()),
                    DataTypes.FIELD("amount", DataTypes.DECIMAL(10, 2)),
                    DataTypes.FIELD("created", DataTypes.TIMESTAMP(6)),
                    DataTypes.FIELD("day", DataTypes.DATE()),
                    DataTypes.FIELD("note", DataTypes.STRING()));

    private static final String ANN = "1|ann|12.50|2025-12-06T05:46:40.123456|2025-12-06|first";
    private static final String ANN_B = "1|ann b|13.00|2025-12-06T05:46:40.123456|2025-12-06|first";
    private static final String BOB = "2|bob|0.99|2025-12-06T05:46:40.123456|2025-12-06|null";
    private static final String CY = "3|cy|5.00|2025-12-06T05:46:40.123457|2025-12-07|null";
    private static final String CY_B = "3|cy|5.01|2025-12-06T05:46:40.123457|2025-12-07|null";
    private static final String DEE = "4|d \"q\" é\n|-0.01|2025-12-06T05:46:40.123458|2025-12-08|";

    /** Every change of the vectors, as RowKind and row. */
    private static final List<String> CHANGES =
            List.of(
                    "+I " + ANN, "+I " + BOB, "+I " + CY, "-U " + ANN, "+U " + ANN_B, "-D " + BOB,
                    "-U " + CY, "+U " + CY_B, "+I " + DEE);

    /** The source table after them. */
    private static final Map<Integer, String> TABLE = Map.of(1, ANN_B, 3, CY_B, 4, DEE);

    @Test
    void debeziumJsonReadsEveryChangeWithBothImagesOfAnUpdate() throws Exception {
        List<RowData> rows =
                read("debezium-json", new DebeziumJsonFormatFactory(),
                        List.of("source.database", "source.table"));
        assertEquals(CHANGES, changes(rows));
        assertEquals(TABLE, apply(rows));
        for (RowData row : rows) {
            assertEquals("shop", row.getString(6).toString());
            assertEquals("orders", row.getString(7).toString());
        }
    }

    @Test
    void canalJsonReadsEveryChangeRebuildingTheBeforeImageFromOld() throws Exception {
        List<RowData> rows =
                read("canal-json", new CanalJsonFormatFactory(), List.of("database", "table", "pk-names"));
        assertEquals(CHANGES, changes(rows));
        assertEquals(TABLE, apply(rows));
        for (RowData row : rows) {
            assertEquals("shop", row.getString(6).toString());
            assertEquals("orders", row.getString(7).toString());
            assertEquals("id", row.getArray(8).getString(0).toString());
        }
    }

    /** Each kind of column a JSON reader must map, with the Flink type it is read as. */
    @Test
    void debeziumJsonReadsEveryKindOfColumnWithItsFlinkType() throws Exception {
        DataType kinds =
                DataTypes.ROW(
                        DataTypes.FIELD("id", DataTypes.INT().notNull()),
                        // LARGEINT: Doris sends its digits as text, beyond DECIMAL(38)'s range.
                        DataTypes.FIELD("big", DataTypes.STRING()),
                        DataTypes.FIELD("price", DataTypes.DECIMAL(38, 10)),
                        DataTypes.FIELD("at", DataTypes.TIMESTAMP(3)),
                        DataTypes.FIELD("doc", DataTypes.STRING()),
                        DataTypes.FIELD("tags", DataTypes.ARRAY(DataTypes.INT())),
                        DataTypes.FIELD("attrs", DataTypes.MAP(DataTypes.STRING(), DataTypes.INT())),
                        DataTypes.FIELD(
                                "dims",
                                DataTypes.ROW(
                                        DataTypes.FIELD("w", DataTypes.INT()),
                                        DataTypes.FIELD("unit", DataTypes.STRING()))));
        DeserializationSchema<RowData> decoder = decoder(new DebeziumJsonFormatFactory(), kinds, List.of());
        List<RowData> rows = new ArrayList<>();
        for (String[] message : messages("kinds-debezium-json")) {
            decoder.deserialize(bytes(message[1]), collector(rows));
        }
        assertEquals(2, rows.size());
        RowData full = rows.get(0);
        assertEquals(RowKind.INSERT, full.getRowKind());
        assertEquals("170141183460469231731687303715884105727", full.getString(1).toString());
        assertEquals("-1234567890.1234567890", full.getDecimal(2, 38, 10).toBigDecimal().toPlainString());
        assertEquals("2025-12-06T05:46:40.123", full.getTimestamp(3, 3).toLocalDateTime().toString());
        assertEquals("{\"a\":[1,2]}", full.getString(4).toString());
        assertEquals(2, full.getArray(5).size());
        assertEquals(1, full.getArray(5).getInt(0));
        assertTrue(full.getArray(5).isNullAt(1));
        assertEquals(1, full.getMap(6).size());
        assertEquals("k", full.getMap(6).keyArray().getString(0).toString());
        assertEquals(2, full.getMap(6).valueArray().getInt(0));
        assertEquals(3, full.getRow(7, 2).getInt(0));
        assertEquals("cm", full.getRow(7, 2).getString(1).toString());
        RowData empty = rows.get(1);
        for (int f : new int[] {1, 2, 3, 4, 6}) {
            assertTrue(empty.isNullAt(f), "field " + f);
        }
        assertEquals(0, empty.getArray(5).size());
        assertTrue(empty.getRow(7, 2).isNullAt(0) && empty.getRow(7, 2).isNullAt(1));
    }

    /** upsert-kafka's reading: the value through the json format, a null value deletes the key. */
    @Test
    void upsertKeepsTheTableByKeyWithTombstonesForDeletes() throws Exception {
        DeserializationSchema<RowData> key =
                decoder(new JsonFormatFactory(), DataTypes.ROW(DataTypes.FIELD("id", DataTypes.INT())), List.of());
        DeserializationSchema<RowData> value = decoder(new JsonFormatFactory(), ORDERS, List.of());
        Map<Integer, String> table = new TreeMap<>();
        List<String> seen = new ArrayList<>();
        for (String[] message : messages("upsert")) {
            int id = key.deserialize(bytes(message[0])).getInt(0);
            if (message[1] == null) {
                table.remove(id);
                seen.add("-D " + id);
            } else {
                String row = text(value.deserialize(bytes(message[1])));
                assertEquals(id, Integer.parseInt(row.split("\\|")[0]), "the key is the row's id");
                table.put(id, row);
                seen.add("+U " + id);
            }
        }
        assertEquals(List.of("+U 1", "+U 2", "+U 3", "+U 1", "-D 2", "+U 3", "+U 4"), seen);
        assertEquals(TABLE, table);
    }

    /** dcs's change records through the json format: op, TSO and the row. */
    @Test
    void changelogJsonKeepsEveryRowKind() throws Exception {
        DataType record =
                DataTypes.ROW(
                        DataTypes.FIELD("op", DataTypes.STRING()),
                        DataTypes.FIELD("tso", DataTypes.BIGINT()),
                        DataTypes.FIELD("lsn", DataTypes.BIGINT()),
                        DataTypes.FIELD("row", ORDERS));
        DeserializationSchema<RowData> value = decoder(new JsonFormatFactory(), record, List.of());
        List<String> seen = new ArrayList<>();
        for (String[] message : messages("changelog-json")) {
            RowData r = value.deserialize(bytes(message[1]));
            String op = r.getString(0).toString();
            seen.add(op + " " + text(r.getRow(3, 6)));
            if (seen.size() <= 2) {
                assertTrue(r.isNullAt(1), "a snapshot row has no TSO");
            } else {
                long ms = r.getLong(1) >> 18;
                assertTrue(ms >= 1_765_000_001_000L && ms <= 1_765_000_001_004L, "the change's TSO: " + ms);
            }
        }
        assertEquals(CHANGES, seen);
    }

    // --- Flink's formats, built as a connector builds them ---

    private static List<RowData> read(String vectors, org.apache.flink.table.factories.DeserializationFormatFactory factory,
            List<String> metadata) throws Exception {
        DeserializationSchema<RowData> decoder = decoder(factory, ORDERS, metadata);
        List<RowData> rows = new ArrayList<>();
        for (String[] message : messages(vectors)) {
            decoder.deserialize(bytes(message[1]), collector(rows));
        }
        return rows;
    }

    private static Collector<RowData> collector(List<RowData> rows) {
        return new Collector<>() {
            @Override
            public void collect(RowData record) {
                rows.add(record);
            }

            @Override
            public void close() {}
        };
    }

    @SuppressWarnings("unchecked")
    private static DeserializationSchema<RowData> decoder(
            org.apache.flink.table.factories.DeserializationFormatFactory factory, DataType physical,
            List<String> metadata) throws Exception {
        DecodingFormat<DeserializationSchema<RowData>> format =
                factory.createDecodingFormat(null, new Configuration());
        if (!metadata.isEmpty()) {
            format.applyReadableMetadata(metadata);
        }
        DeserializationSchema<RowData> schema = format.createRuntimeDecoder(new SourceContext(), physical);
        schema.open(
                new DeserializationSchema.InitializationContext() {
                    @Override
                    public MetricGroup getMetricGroup() {
                        return new UnregisteredMetricsGroup();
                    }

                    @Override
                    public UserCodeClassLoader getUserCodeClassLoader() {
                        return SimpleUserCodeClassLoader.create(KafkaFormatsTest.class.getClassLoader());
                    }
                });
        return schema;
    }

    /** What a table source gives a format: Flink's internal type information. */
    private static final class SourceContext implements DynamicTableSource.Context {
        @Override
        public <T> TypeInformation<T> createTypeInformation(DataType producedDataType) {
            return createTypeInformation(producedDataType.getLogicalType());
        }

        @Override
        @SuppressWarnings("unchecked")
        public <T> TypeInformation<T> createTypeInformation(LogicalType producedLogicalType) {
            return (TypeInformation<T>) InternalTypeInfo.of(producedLogicalType);
        }

        @Override
        public DynamicTableSource.DataStructureConverter createDataStructureConverter(DataType producedDataType) {
            throw new UnsupportedOperationException("not used by the JSON formats");
        }
    }

    // --- the vectors ---

    /** key, value per message (null for none). */
    private static List<String[]> messages(String format) throws Exception {
        List<String[]> out = new ArrayList<>();
        for (String line : Files.readAllLines(VECTORS.resolve(format + ".txt"), StandardCharsets.UTF_8)) {
            String[] parts = line.split("\t", -1);
            assertEquals(2, parts.length, line);
            out.add(new String[] {nullable(parts[0]), nullable(parts[1])});
        }
        return out;
    }

    private static String nullable(String s) {
        return s.equals("null") ? null : s;
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static List<String> changes(List<RowData> rows) {
        List<String> out = new ArrayList<>();
        for (RowData row : rows) {
            out.add(row.getRowKind().shortString() + " " + text(row));
        }
        return out;
    }

    private static Map<Integer, String> apply(List<RowData> rows) {
        Map<Integer, String> table = new TreeMap<>();
        for (RowData row : rows) {
            if (row.getRowKind() == RowKind.INSERT || row.getRowKind() == RowKind.UPDATE_AFTER) {
                table.put(row.getInt(0), text(row));
            } else {
                assertEquals(text(row), table.remove(row.getInt(0)), "a retraction retracts the row as it was");
            }
        }
        return table;
    }

    /** id|name|amount|created|day|note, as Flink holds them. */
    private static String text(RowData row) {
        return row.getInt(0)
                + "|" + row.getString(1)
                + "|" + row.getDecimal(2, 10, 2).toBigDecimal().toPlainString()
                + "|" + row.getTimestamp(3, 6).toLocalDateTime()
                + "|" + LocalDate.ofEpochDay(row.getInt(4))
                + "|" + (row.isNullAt(5) ? "null" : row.getString(5).toString());
    }
}
